-- cache/cache_gone.lua: the end of a relist, just before cache_swap.lua: the objects the cache
-- holds that the LIST no longer has, i.e. deleted while no watch ran (a 410, a restart, a lease
-- handover). The informer turns each into a delete of the change stream and a "Deleted" of the
-- history (insight_change.lua, insight_history.lua, which compare with the cached object); the
-- swap then drops them. After a FLUSHALL the cache holds nothing, so there is nothing to find.
-- Temporary keys as in cache_swap.lua (PREFIX = ARGV[3]).
-- ARGV: kind, cluster, prefix
-- Returns a flat list: scope, name, scope, name...
local kind, cluster, tmp = ARGV[1], ARGV[2], ARGV[3]
local base = 'fg:o:' .. kind .. ':' .. cluster .. ':'
local gone = {}
for _, sc in ipairs(redis.call('SMEMBERS', 'fg:s:' .. kind .. ':' .. cluster)) do
  local listed = tmp .. 'o:' .. sc
  for _, name in ipairs(redis.call('HKEYS', base .. sc)) do
    if redis.call('HEXISTS', listed, name) == 0 then
      gone[#gone + 1] = sc
      gone[#gone + 1] = name
    end
  end
end
return gone
