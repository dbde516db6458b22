-- cache/cache_tmpdrop.lua: deletes the temporary keys of an abandoned relist (see
-- cache_swap.lua for their names). ARGV[1]: the prefix. Returns the number of keys deleted.
local tmp = ARGV[1]
local n = 0
for _, sc in ipairs(redis.call('SMEMBERS', tmp .. 's')) do
  n = n + redis.call('DEL', tmp .. 'o:' .. sc, tmp .. 'i:' .. sc)
end
for _, pa in ipairs(redis.call('SMEMBERS', tmp .. 'ax')) do
  n = n + redis.call('DEL', tmp .. 'a:' .. pa)
end
return n + redis.call('DEL', tmp .. 's', tmp .. 'ax')
