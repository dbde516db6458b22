-- cache/cache_upsert.lua: one object written to the canonical keys (cache/SCHEMA.md section 2),
-- atomically, by either writer of an object:
--   mode 'watch' (or absent): a watch event ADDED/MODIFIED applied by its informer, with the
--     informer's bookkeeping (fg:rv, fg:sync);
--   mode 'through': the object a write handler got back from the cluster (write-through, so a
--     GET right after the write shows it without waiting for the watch). fg:rv is left alone:
--     it stays the watch's resume point. The object it replaces (nothing: '') is kept aside
--     in KEYS[6] until the watch brings the version: the watch's history and change stream
--     comparisons (insight_history.lua, insight_change.lua) start from it, so a write's
--     changes are recorded once, by the watch, and the write's own round trip stays short.
-- Neither writer lets an older version replace a newer one: the watch keeps a newer object a
-- write put there, and a write-through does nothing once the watch reached its version.
-- KEYS[1] fg:o:{kind}:{cluster}:{scope}   KEYS[2] fg:i:...   KEYS[3] fg:s:{kind}:{cluster}
-- KEYS[4] fg:rv:{cluster}:{resource}      KEYS[5] fg:sync:{cluster}:{resource}
-- KEYS[6] fg:pre:{kind}:{cluster}:{scope} (name -> the object before the versions written
--         through that the watch has not brought yet; '' for none)
-- ARGV: name, object JSON, scope, resourceVersion, now (Unix ms), app ('' unless a pod),
--       cluster, kind, mode
-- Returns (watch) 1 when the object is new, 0 otherwise; (through) 1 stored, 2 nothing to do
-- (the cache shows this version or a newer one), -1 not comparable (not a decimal version).
local name, obj, scope, rv, now, app, cluster, kind, mode =
  ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8], ARGV[9] or 'watch'

-- resourceVersions compare as the decimal numbers etcd gives out (Kubernetes calls them opaque;
-- fleetgate relies on their order for these guards only). nil when either is not one.
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
-- The cached object's version: its first "version" member, since every simplified object
-- starts with its identity (name, project, cluster, zone, uid, version: DNS names and strings
-- whose quotes JSON escapes), before any member a user could name "version".
local function version_of(json)
  return json and string.match(json, '"version":"([^"]*)"') or nil
end

local PRE_TTL_MS = 3600000

local old = redis.call('HGET', KEYS[1], name)
if mode == 'through' then
  if not digits(rv) then return -1 end
  local seen = redis.call('GET', KEYS[4])
  if seen and newer(rv, seen) == false then return 2 end
  if old and newer(rv, version_of(old)) == false then return 2 end
  -- The oldest object not compared yet stays (a second write before the watch brought the
  -- first keeps the first's). One kept for an object since deleted, or from before the watch
  -- passed the cached object (a relist), is stale: the watch would have dropped it.
  local pre = redis.call('HEXISTS', KEYS[6], name) == 1
  local stale = not old or (seen ~= false and newer(version_of(old), seen) ~= true)
  if not pre or stale then redis.call('HSET', KEYS[6], name, old or '') end
  redis.call('PEXPIRE', KEYS[6], PRE_TTL_MS)
else
  -- The object kept aside by a write-through: the watch's comparisons of this event started
  -- from it; it moves on to this event while the cache holds a newer version written through,
  -- and goes once the watch has caught up with the cached object.
  local pre = redis.call('HGET', KEYS[6], name)
  if pre then
    if old and newer(version_of(old), rv) then
      if pre == '' or newer(rv, version_of(pre)) then redis.call('HSET', KEYS[6], name, obj) end
    else
      redis.call('HDEL', KEYS[6], name)
    end
  end
end
if mode ~= 'through' and old and (old == obj or newer(version_of(old), rv)) then
  -- a write-through put this very object (the watch bringing the version it wrote) or a newer
  -- version: keep it, the watch only moves on
  redis.call('SET', KEYS[4], rv)
  redis.call('HSET', KEYS[5], 'rv', rv, 'lastEventMs', now)
  return 0
end

redis.call('HSET', KEYS[1], name, obj)
local added = 0
if not old then
  redis.call('ZADD', KEYS[2], 0, name)
  redis.call('SADD', KEYS[3], scope)
  -- a write-through before the first sync leaves the count to the list that makes fg:sync
  if mode ~= 'through' or redis.call('EXISTS', KEYS[5]) == 1 then
    redis.call('HINCRBY', KEYS[5], 'objects', 1)
  end
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
if mode == 'through' then return 1 end
redis.call('SET', KEYS[4], rv)
redis.call('HSET', KEYS[5], 'rv', rv, 'lastEventMs', now)
return added
