-- cache/cache_delete.lua: one watch event DELETED applied to the canonical keys.
-- KEYS and ARGV as cache_upsert.lua (ARGV[2], the object, is unused; ARGV[6] is ignored: the
-- app the pod was filed under is read from the cached copy). Returns 1 when it was cached.
local name, scope, rv, now, cluster, kind = ARGV[1], ARGV[3], ARGV[4], ARGV[5], ARGV[7], ARGV[8]
local old = redis.call('HGET', KEYS[1], name)
local removed = 0
if old then
  redis.call('HDEL', KEYS[1], name)
  redis.call('ZREM', KEYS[2], name)
  if redis.call('EXISTS', KEYS[1]) == 0 then redis.call('SREM', KEYS[3], scope) end
  redis.call('HINCRBY', KEYS[5], 'objects', -1)
  removed = 1
  if kind == 'pod' then
    local ok, o = pcall(cjson.decode, old)
    if ok and type(o) == 'table' and type(o.app) == 'string' and o.app ~= '' then
      local k = 'fg:a:' .. cluster .. ':' .. scope .. ':' .. o.app
      redis.call('SREM', k, name)
      if redis.call('EXISTS', k) == 0 then redis.call('SREM', 'fg:ax:' .. cluster, scope .. ':' .. o.app) end
    end
  end
end
redis.call('SET', KEYS[4], rv)
redis.call('HSET', KEYS[5], 'rv', rv, 'lastEventMs', now)
return removed
