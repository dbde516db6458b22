-- cache/insight_change.lua: one watch event of a workload, pod or project, added to its
-- project's change stream (cache/SCHEMA.md section 2) when it really changed something. Run
-- just before the cache's own write of the same event (cache_upsert.lua / cache_delete.lua),
-- so it compares the event with the object the cache holds.
-- KEYS[1] fg:o:{kind}:{cluster}:{scope}   KEYS[2] fg:chg:{project}
-- ARGV: name, object JSON ('' for a delete), API kind (App, Pod...), cluster, version, time
--       (RFC 3339), max entries of the stream, cache kind (pod, app...)
-- Returns the new entry's id, or false when nothing changed (the cache holds this version
-- already: a replayed watch; or a delete of an object the cache never held).
local name, obj, kind, cluster, version, time, maxlen, ckind =
  ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8]
local old = redis.call('HGET', KEYS[1], name)
local function decode(s)
  if not s or s == '' then return nil end
  local ok, o = pcall(cjson.decode, s)
  if ok and type(o) == 'table' then return o end
  return nil
end
local o = decode(old)
local n = decode(obj)
if obj == '' then
  if not old then return false end
elseif o and o.version == version then
  return false
end
-- the app the object belongs to, for the stream's app filter
local app = ''
local src = n or o
if ckind == 'app' then
  app = name
elseif src then
  if type(src.app) == 'string' then app = src.app
  elseif ckind == 'scaler' and type(src.target) == 'table' and type(src.target.name) == 'string'
         and src.target.kind == 'Deployment' then app = src.target.name end
end
local fields = {'t', obj == '' and 'delete' or 'upsert', 'k', kind, 'n', name, 'c', cluster,
                'v', version, 'ts', time, 'a', app}
if obj ~= '' then
  fields[#fields + 1] = 'o'
  fields[#fields + 1] = obj
end
return redis.call('XADD', KEYS[2], 'MAXLEN', '~', maxlen, '*', unpack(fields))
