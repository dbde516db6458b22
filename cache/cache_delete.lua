-- cache/cache_delete.lua: one watch event DELETED applied to the canonical keys.
-- KEYS and ARGV as cache_upsert.lua (ARGV[2], the object, is unused; ARGV[6] is ignored: the
-- app the pod was filed under is read from the cached copy). A cached object newer than the
-- deletion (made again since, and written through by the write that made it) is kept.
-- Returns 1 when it was removed.
local name, scope, rv, now, cluster, kind = ARGV[1], ARGV[3], ARGV[4], ARGV[5], ARGV[7], ARGV[8]

-- as cache_upsert.lua: decimal resourceVersions, the cached object's first "version" member
local function digits(s)
  if type(s) ~= 'string' or not string.match(s, '^%d+$') then return nil end
  return (string.gsub(s, '^0+(%d)', '%1'))
end
local function newer(a, b) -- a > b, or nil
  a, b = digits(a), digits(b)
  if not a or not b then return nil end
  if #a ~= #b then return #a > #b end
  return a > b
end

local old = redis.call('HGET', KEYS[1], name)
if old and newer(string.match(old, '"version":"([^"]*)"'), rv) then old = nil end
local removed = 0
if old then
  redis.call('HDEL', KEYS[1], name)
  redis.call('ZREM', KEYS[2], name)
  if redis.call('EXISTS', KEYS[1]) == 0 then redis.call('SREM', KEYS[3], scope) end
  redis.call('HINCRBY', KEYS[5], 'objects', -1)
  redis.call('HDEL', KEYS[6], name) -- nothing left to compare with (cache_upsert.lua)
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
