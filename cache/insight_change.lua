-- cache/insight_change.lua: one change of a workload, pod or project, added to its project's
-- change stream (cache/SCHEMA.md section 2) when it really changed something. Run just before
-- the informer's own write of the same object (a watch event, before cache_upsert.lua /
-- cache_delete.lua; a LIST item), so it compares the object with the one the cache holds.
-- A write-through (src/cache/through.c, any replica) usually stores a write's version before
-- the watch brings it, and keeps the object it replaced in KEYS[3] (cache_upsert.lua): the
-- watch's comparison of that version starts from there, so the spec change of a write made
-- through fleetgate is streamed by the watch, in order with every other change.
-- KEYS[1] fg:o:{kind}:{cluster}:{scope}   KEYS[2] fg:chg:{project}
-- KEYS[3] fg:pre:{kind}:{cluster}:{scope} (what a write-through replaced: cache_upsert.lua)
-- KEYS[4] fg:chgv:{kind}:{cluster}:{scope}:{name} (the version last streamed for the object)
-- ARGV: name, object JSON ('' for a delete), API kind (App, Pod...), cluster, version, time
--       (RFC 3339), max entries of the stream, cache kind (pod, app...), mode ('watch' or
--       'list'), and optionally the app the object belongs to (its "app" member, '' for none)
--       when the caller knows it, so the object need not be decoded for it
-- Once and in order: nothing when the cache holds this version or a newer one (a replayed
-- watch; an older watch event after a write-through stored a newer one) unless a write-through
-- kept what it replaced, nor when KEYS[4] says this version or a newer one was streamed
-- already; it lives an hour, after which the cached version alone guards.
-- A LIST item ('list': a relist after a 410, a restart, a lease handover) is streamed only when
-- the cache holds an older version of the object: a change made while no watch ran. An object
-- the cache lacks is not streamed, so a relist after a FLUSHALL streams nothing; the objects a
-- relist no longer finds come as deletes (cache_gone.lua, then mode 'watch').
-- Returns the new entry's id, or false when nothing was added.
local name, obj, kind, cluster, version, time, maxlen, ckind, mode, known_app =
  ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8], ARGV[9] or 'watch',
  ARGV[10]
local MARK_TTL_S = 3600

-- resourceVersions compare as decimal numbers, as in cache_upsert.lua; nil when not comparable
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

-- The cached object's version, read as cache_upsert.lua reads it (its first "version" member:
-- every simplified object starts with its identity), so the usual answer, "nothing changed"
-- (the watch bringing the version a write-through streamed), costs no JSON decoding.
local function version_of(json)
  return json and string.match(json, '"version":"([^"]*)"') or nil
end
local function decode(s)
  if not s or s == '' then return nil end
  local ok, o = pcall(cjson.decode, s)
  if ok and type(o) == 'table' then return o end
  return nil
end

local old = redis.call('HGET', KEYS[1], name)
-- A version written through holds the cache at or past this event: the comparison starts from
-- the object it replaced, unless that is this version or newer. '' there: the write made it.
local made = false
if obj ~= '' and old then
  local pre = redis.call('HGET', KEYS[3], name)
  if pre and newer(version, version_of(old)) == false then
    if pre ~= '' and newer(version, version_of(pre)) ~= true then return false end
    made = pre == ''
    old = not made and pre
  end
end
local ov = version_of(old)
if obj == '' then
  if not old then return false end
elseif mode == 'list' and not made and not decode(old) then
  return false
elseif ov and ov == version then
  return false
end
-- older than the cached object: a write-through stored a newer one first
if ov and newer(ov, version) then return false end
local mark = redis.call('GET', KEYS[4])
if mark and (mark == version or newer(version, mark) == false) then return false end
redis.call('SET', KEYS[4], version, 'EX', MARK_TTL_S)
-- the app the object belongs to, for the stream's app filter
-- (an app is its own: only the other kinds decode an object, the new one or else the old)
local app = ''
local src = nil
if ckind ~= 'app' and not (known_app and obj ~= '') then src = decode(obj) or decode(old) end
if ckind == 'app' then
  app = name
elseif known_app and obj ~= '' then
  app = known_app
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
