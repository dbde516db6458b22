-- cache/cache_upsert.lua: one watch event ADDED/MODIFIED applied to the canonical keys
-- (cache/SCHEMA.md section 2), plus the informer's bookkeeping, atomically.
-- KEYS[1] fg:o:{kind}:{cluster}:{scope}   KEYS[2] fg:i:...   KEYS[3] fg:s:{kind}:{cluster}
-- KEYS[4] fg:rv:{cluster}:{resource}      KEYS[5] fg:sync:{cluster}:{resource}
-- ARGV: name, object JSON, scope, resourceVersion, now (Unix ms), app ('' unless a pod),
--       cluster, kind
-- Returns 1 when the object is new, 0 when it replaced one.
local name, obj, scope, rv, now, app, cluster, kind =
  ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8]
local old = redis.call('HGET', KEYS[1], name)
redis.call('HSET', KEYS[1], name, obj)
local added = 0
if not old then
  redis.call('ZADD', KEYS[2], 0, name)
  redis.call('SADD', KEYS[3], scope)
  redis.call('HINCRBY', KEYS[5], 'objects', 1)
  added = 1
end
if kind == 'pod' then
  local oldapp = ''
  if old then
    local ok, o = pcall(cjson.decode, old)
    if ok and type(o) == 'table' and type(o.app) == 'string' then oldapp = o.app end
  end
  if oldapp ~= app then
    local ax = 'fg:ax:' .. cluster
    if oldapp ~= '' then
      local k = 'fg:a:' .. cluster .. ':' .. scope .. ':' .. oldapp
      redis.call('SREM', k, name)
      if redis.call('EXISTS', k) == 0 then redis.call('SREM', ax, scope .. ':' .. oldapp) end
    end
    if app ~= '' then
      redis.call('SADD', 'fg:a:' .. cluster .. ':' .. scope .. ':' .. app, name)
      redis.call('SADD', ax, scope .. ':' .. app)
    end
  end
end
redis.call('SET', KEYS[4], rv)
redis.call('HSET', KEYS[5], 'rv', rv, 'lastEventMs', now)
return added
