-- cache/insight_history.lua: the state changes of one object, found by comparing its new
-- simplified form with the one the cache holds, added to its project's workload history
-- (cache/SCHEMA.md section 2). Run by the informer (pipelined; only the lease holder writes),
-- on a watch event or a LIST item, just before the cache's own write of the same object.
-- KEYS[1] fg:o:{kind}:{cluster}:{scope}   KEYS[2] fg:hist:{project}   KEYS[3] fg:histx:{project}
-- KEYS[4] fg:pre:{kind}:{cluster}:{scope} (what a write-through replaced: cache_upsert.lua)
-- ARGV: name, object JSON ('' for a delete), API kind (App, Pod...), cluster, version, now (Unix
--       ms), max age (ms), max entries of the project, listing ('1': a LIST item, or a watch's
--       MODIFIED event: an object that existed before, never "Created")
-- Exactly once: an entry's id is a hash of cluster, kind, name, uid, change and the new
-- version, set with HSETNX, so a replayed watch adds nothing. A write-through (any replica)
-- usually stores a write's version before the watch brings it, and keeps the object it
-- replaced in KEYS[4]: the watch's comparison of that version starts from there, so a write's
-- changes are found by the watch, as every other change is. Otherwise nothing when the cache
-- holds this version or a newer one. A LIST item is compared
-- only with an object the cache holds (never "Created"), so a relist, even after a FLUSHALL,
-- adds only changes that really happened while the watch was away; so is a MODIFIED event (one
-- may come between a FLUSHALL and the informer seeing it).
-- Returns the number of entries added.
local name, obj, kind, cluster, version = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local now, max_age, max_n, listing = tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8]),
  ARGV[9] == '1'

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

local function decode(s)
  if not s or s == '' then return nil end
  local ok, o = pcall(cjson.decode, s)
  if ok and type(o) == 'table' then return o end
  return nil
end
-- The versions are read as cache_upsert.lua reads them (the first "version" member: every
-- simplified object starts with its identity).
local function version_of(json) return string.match(json, '"version":"([^"]*)"') end
local old = redis.call('HGET', KEYS[1], name)
-- A version written through (cache_upsert.lua) holds the cache at or past this event: the
-- comparison starts from the object it replaced, unless that is this version or newer (this
-- event was compared). '' there: the write made the object.
local made = false
if obj ~= '' and old then
  local pre, nv = redis.call('HGET', KEYS[4], name), version_of(obj)
  if pre and newer(nv, version_of(old)) == false then
    if pre ~= '' and newer(nv, version_of(pre)) ~= true then return 0 end
    made = pre == ''
    old = not made and pre
  end
end
-- Cheap exits before any decoding, for the usual "nothing to compare": a replay, an older
-- version than the cached one; the decoded checks below stay as they were.
if obj ~= '' and old then
  local ov, nv = version_of(old), version_of(obj)
  if ov and ov == nv then return 0 end
  if newer(ov, nv) then return 0 end
end
-- A pod's entries all come from its new state (crash loops, OOM kills, unschedulable,
-- evicted; its creation and deletion are none), and each needs one of these words in the new
-- object's text (fleetgate's own JSON: ASCII never escaped), so most pod events, its
-- scheduling, start and readiness, are answered without decoding either object.
if kind == 'Pod' then
  if obj == '' then return 0 end
  local found = false
  for _, w in ipairs({'"lastTermination"', 'CrashLoopBackOff', 'OOMKilled', 'Unschedulable',
                      'Evicted'}) do
    if string.find(obj, w, 1, true) then found = true break end
  end
  if not found then return 0 end
end
local o = decode(old)
local n = decode(obj)
if obj ~= '' and not n then return 0 end
if not o and ((listing and not made) or not n) then return 0 end
if o and n and o.version == n.version then return 0 end
-- an older version than the cached one (a write-through stored the newer one first)
if o and n and newer(o.version, n.version) then return 0 end

local function str(v) if type(v) == 'string' then return v end return nil end
local function num(v) if type(v) == 'number' then return v end return 0 end
local function conds(x)
  local m = {}
  if x and type(x.conditions) == 'table' then
    for _, c in ipairs(x.conditions) do
      if type(c) == 'table' and type(c.type) == 'string' then m[c.type] = c end
    end
  end
  return m
end
local function byname(list)
  local m = {}
  if type(list) == 'table' then
    for _, c in ipairs(list) do
      if type(c) == 'table' and type(c.name) == 'string' then m[c.name] = c end
    end
  end
  return m
end
local function same(a, b)
  if type(a) ~= type(b) then return false end
  if type(a) ~= 'table' then return a == b end
  return cjson.encode(a) == cjson.encode(b)
end

local cur = n or o
local app = nil
if kind == 'App' then app = name
elseif kind == 'Pod' or kind == 'JobSet' then app = str(cur.app)
elseif kind == 'Scaler' and type(cur.target) == 'table' and cur.target.kind == 'Deployment' then
  app = str(cur.target.name)
end
-- who: only a change whose version carries a new fleetgate stamp is fleetgate's
local actor, rid = cjson.null, cjson.null
if n and str(n.requestId) and (not o or o.requestId ~= n.requestId) then
  rid = n.requestId
  if str(n.requestedBy) and n.requestedBy ~= '' then actor = n.requestedBy end
end

local entries = {}
local function add(change, summary, from, to, attributed)
  entries[#entries + 1] = {change = change, summary = summary, from = from, to = to,
                           attributed = attributed}
end
-- the changed fields of two containers lists: from and to keyed "containers.{name}.{field}"
local function container_diff(a, b, from, to)
  local ma, mb, fields = byname(a), byname(b), {}
  for nm, ca in pairs(ma) do
    local cb = mb[nm]
    if not cb then
      from['containers.' .. nm] = ca.image or true; to['containers.' .. nm] = cjson.null
      fields[#fields + 1] = nm
    else
      for _, f in ipairs({'image', 'resources', 'ports'}) do
        if not same(ca[f], cb[f]) then
          from['containers.' .. nm .. '.' .. f] = ca[f] == nil and cjson.null or ca[f]
          to['containers.' .. nm .. '.' .. f] = cb[f] == nil and cjson.null or cb[f]
          fields[#fields + 1] = nm .. '.' .. f
        end
      end
    end
  end
  for nm, cb in pairs(mb) do
    if not ma[nm] then
      from['containers.' .. nm] = cjson.null; to['containers.' .. nm] = cb.image or true
      fields[#fields + 1] = nm
    end
  end
  table.sort(fields)
  return fields
end
local function nkeys(t) local c = 0 for _ in pairs(t) do c = c + 1 end return c end
local function images(x)
  local l = {}
  if x and type(x.containers) == 'table' then
    for _, c in ipairs(x.containers) do
      if type(c) == 'table' and str(c.image) then l[#l + 1] = c.image end
    end
  end
  return table.concat(l, ', ')
end
-- spec fields compared one by one (their changes are "SpecChanged")
local function spec_diff(fields, from, to)
  local names = {}
  for _, f in ipairs(fields) do
    if not same(o[f], n[f]) then
      from[f] = o[f] == nil and cjson.null or o[f]
      to[f] = n[f] == nil and cjson.null or n[f]
      names[#names + 1] = f
    end
  end
  return names
end

if not n then
  if kind ~= 'Pod' then add('Deleted', kind .. ' ' .. name .. ' deleted', nil, nil, false) end
elseif not o then
  if kind ~= 'Pod' then
    local s = kind .. ' ' .. name .. ' created'
    local im = images(n)
    if im ~= '' then s = s .. ' (' .. im .. ')' end
    add('Created', s, nil, nil, true)
  end
elseif kind == 'App' then
  local od, nd = num((o.replicas or {}).desired), num((n.replicas or {}).desired)
  local ol, nl = o.labels or {}, n.labels or {}
  local ostop = ol['fleetgate.io/stopped'] == 'true'
  local nstop = nl['fleetgate.io/stopped'] == 'true'
  if nstop and not ostop then
    add('Stopped', 'stopped: replicas ' .. od .. ' → ' .. nd, {replicas = od}, {replicas = nd}, true)
  elseif ostop and not nstop then
    add('Resumed', 'resumed: replicas ' .. od .. ' → ' .. nd, {replicas = od}, {replicas = nd}, true)
  elseif od ~= nd then
    add('ReplicasChanged', 'replicas ' .. od .. ' → ' .. nd, {replicas = od}, {replicas = nd}, true)
  end
  if n.paused == true and o.paused ~= true then
    add('Paused', 'rollout paused', {paused = false}, {paused = true}, true)
  elseif o.paused == true and n.paused ~= true then
    add('Resumed', 'rollout resumed', {paused = true}, {paused = false}, true)
  end
  local from, to = {}, {}
  local fields = container_diff(o.containers, n.containers, from, to)
  if #fields > 0 then
    add('RolloutStarted', 'pod template changed (' .. table.concat(fields, ', ') .. '): ' ..
        images(o) .. ' → ' .. images(n), from, to, true)
  end
  if str(n.restartedAt) and n.restartedAt ~= o.restartedAt then
    add('Restarted', 'restarted at ' .. n.restartedAt, {restartedAt = o.restartedAt or cjson.null},
        {restartedAt = n.restartedAt}, true)
  end
  local sf, st = {}, {}
  local names = spec_diff({'strategy'}, sf, st)
  if #names > 0 then
    add('SpecChanged', 'spec changed: ' .. table.concat(names, ', '), sf, st, true)
  end
  -- rollout state: observed, updated and available at the desired count
  local function done(x)
    local r = x.replicas or {}
    return num(x.observedGeneration) >= num(x.generation) and num(r.updated) >= num(r.desired)
      and num(r.available) >= num(r.desired) and num(r.current) <= num(r.desired)
  end
  local function stalled(x)
    local p = conds(x).Progressing
    return p ~= nil and p.reason == 'ProgressDeadlineExceeded'
  end
  if stalled(n) and not stalled(o) then
    add('RolloutStalled', 'rollout stalled: progress deadline exceeded', nil, nil, false)
  elseif done(n) and not done(o) and not nstop then
    local r = n.replicas or {}
    add('RolloutCompleted', 'rollout complete: ' .. num(r.available) .. '/' .. num(r.desired) ..
        ' available', nil, nil, false)
  end
elseif kind == 'Pod' then
  local oc, ncs = byname(o.containers), byname(n.containers)
  for nm, c in pairs(ncs) do
    local p = oc[nm] or {}
    -- crash-looping: its restart count rose after a failed run (a kubelet's CrashLoopBackOff,
    -- or a last termination with a non-zero exit), recorded at 2, 4, 8... restarts so a pod
    -- that crashes for days leaves a few entries, not one per restart
    local r0, r1 = num(p.restarts), num(c.restarts)
    local lt = c.lastTermination
    local failed = (c.state == 'waiting' and c.reason == 'CrashLoopBackOff') or
      (type(lt) == 'table' and num(lt.exitCode) ~= 0)
    local p2 = 1
    while p2 * 2 <= r1 do p2 = p2 * 2 end -- the largest power of two up to r1
    local mark = r1 >= 2 and p2 > r0
    if failed and mark then
      add('PodCrashLooping', 'container ' .. nm .. ' is crash-looping (restarts ' .. r0 .. ' → ' ..
          r1 .. ')', {restarts = r0}, {restarts = r1}, false)
    end
    local t = c.lastTermination
    local pt = p.lastTermination
    if type(t) == 'table' and t.reason == 'OOMKilled' and
       not (type(pt) == 'table' and same(pt, t)) then
      add('PodOOMKilled', 'container ' .. nm .. ' was OOMKilled', {restarts = num(p.restarts)},
          {restarts = num(c.restarts)}, false)
    elseif c.state == 'terminated' and c.reason == 'OOMKilled' and
       not (p.state == 'terminated' and p.reason == 'OOMKilled') then
      add('PodOOMKilled', 'container ' .. nm .. ' was OOMKilled', nil, nil, false)
    end
  end
  local function unsched(x)
    local s = conds(x).PodScheduled
    return s ~= nil and s.status == 'False' and s.reason == 'Unschedulable'
  end
  if unsched(n) and not unsched(o) then
    local s = conds(n).PodScheduled
    add('PodUnschedulable', 'unschedulable: ' .. (str(s.message) or 'no node fits'), nil, nil,
        false)
  end
  if n.reason == 'Evicted' and o.reason ~= 'Evicted' then
    add('PodEvicted', 'evicted: ' .. (str(n.message) or ''), nil, nil, false)
  end
elseif kind == 'JobSet' then
  if n.state ~= o.state and (n.state == 'Complete' or n.state == 'Failed') then
    local change = n.state == 'Complete' and 'JobSucceeded' or 'JobFailed'
    add(change, 'job ' .. string.lower(n.state == 'Complete' and 'succeeded' or 'failed') ..
        ' (' .. num(n.succeeded) .. ' succeeded, ' .. num(n.failed) .. ' failed)',
        {state = o.state or cjson.null}, {state = n.state}, false)
  end
  if n.suspend == true and o.suspend ~= true then
    add('Suspended', 'suspended', {suspend = false}, {suspend = true}, true)
  elseif o.suspend == true and n.suspend ~= true then
    add('Resumed', 'resumed', {suspend = true}, {suspend = false}, true)
  end
  if n.completions ~= o.completions or n.parallelism ~= o.parallelism then
    local sf, st = {}, {}
    local names = spec_diff({'completions', 'parallelism'}, sf, st)
    add('SpecChanged', 'spec changed: ' .. table.concat(names, ', '), sf, st, true)
  end
elseif kind == 'CronJob' then
  if n.suspend == true and o.suspend ~= true then
    add('Suspended', 'suspended', {suspend = false}, {suspend = true}, true)
  elseif o.suspend == true and n.suspend ~= true then
    add('Resumed', 'resumed', {suspend = true}, {suspend = false}, true)
  end
  local sf, st = {}, {}
  local names = spec_diff({'schedule', 'timeZone', 'concurrencyPolicy'}, sf, st)
  local cf = container_diff(o.containers, n.containers, sf, st)
  for _, f in ipairs(cf) do names[#names + 1] = 'containers.' .. f end
  if #names > 0 then
    add('SpecChanged', 'spec changed: ' .. table.concat(names, ', '), sf, st, true)
  end
elseif kind == 'Scaler' then
  if num(n.desiredReplicas) ~= num(o.desiredReplicas) and num(n.desiredReplicas) > 0 then
    add('ReplicasChanged', 'scaler ' .. name .. ': replicas ' .. num(o.desiredReplicas) .. ' → ' ..
        num(n.desiredReplicas), {replicas = num(o.desiredReplicas)},
        {replicas = num(n.desiredReplicas)}, false)
  end
  local sf, st = {}, {}
  local names = spec_diff({'minReplicas', 'maxReplicas', 'metrics', 'target'}, sf, st)
  if #names > 0 then
    add('SpecChanged', 'spec changed: ' .. table.concat(names, ', '), sf, st, true)
  end
end
if #entries == 0 then return 0 end

local function order(ms, id) return string.format('%013d', 9999999999999 - ms) .. '|' .. id end
local uid = str(cur.uid) or ''
local added = 0
for _, e in ipairs(entries) do
  local id = 'h' .. string.sub(redis.sha1hex(table.concat({cluster, kind, name, uid, e.change,
                                                         version, e.summary}, '\n')), 1, 32)
  -- a JSON object, never an empty array, for from/to
  local function obj_or_nil(t)
    if t == nil or nkeys(t) == 0 then return nil end
    return t
  end
  local entry = {id = id, time = now, object = {kind = kind, name = name},
                 app = app or cjson.null, change = e.change, summary = string.sub(e.summary, 1, 1024),
                 cluster = cluster, from = obj_or_nil(e.from), to = obj_or_nil(e.to),
                 actor = e.attributed and actor or cjson.null,
                 requestId = e.attributed and rid or cjson.null, _ms = now, version = version}
  if redis.call('HSETNX', KEYS[2], id, cjson.encode(entry)) == 1 then
    redis.call('ZADD', KEYS[3], 0, order(now, id))
    added = added + 1
  end
end

-- retention: by age, then by count (a bounded amount of work per call; it converges)
local function drop(members)
  for _, m in ipairs(members) do
    redis.call('ZREM', KEYS[3], m)
    redis.call('HDEL', KEYS[2], string.sub(m, 15))
  end
end
drop(redis.call('ZRANGEBYLEX', KEYS[3], '(' .. string.format('%013d', 9999999999999 - (now - max_age)),
                '+', 'LIMIT', 0, 64))
local cnt = redis.call('ZCARD', KEYS[3])
if cnt > max_n then drop(redis.call('ZRANGE', KEYS[3], max_n, max_n + 63)) end
return added
