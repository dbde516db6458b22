-- cache/insight_event.lua: one Kubernetes Event (simplified, cache/SCHEMA.md section 1) folded
-- into its project's timeline, which outlives the cluster's own event TTL (SCHEMA.md section 2).
-- KEYS[1] fg:ev:{project}   KEYS[2] fg:evx:{project}   KEYS[3] fg:o:pod:{cluster}:{project}
-- ARGV: event JSON, firstSeen (Unix ms), lastSeen (Unix ms), now (Unix ms), max age (ms),
--       max events of the project
-- Repeats fold into one entry: same cluster, object (kind, name, uid), type, reason and message.
-- Its count sums the counts of the Kubernetes Events folded into it (the last 32 by name in
-- _src, older ones frozen into _carry), firstSeenAt is the earliest and lastSeenAt the latest
-- time. Applying the same Event twice (a relist, a replayed watch) changes nothing.
-- Returns 1 when the timeline changed, 0 when the event is not kept (an object kind the API
-- does not show, older than the retention) or changed nothing.
local ok, ev = pcall(cjson.decode, ARGV[1])
if not ok or type(ev) ~= 'table' or type(ev.object) ~= 'table' then return 0 end
local first, last, now = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local max_age, max_n = tonumber(ARGV[5]), tonumber(ARGV[6])
local kinds = {Pod = 'Pod', Deployment = 'App', ReplicaSet = 'App', Job = 'JobSet',
               CronJob = 'CronJob', HorizontalPodAutoscaler = 'Scaler', Namespace = 'Project'}
local kind = kinds[ev.object.kind]
local name = ev.object.name
if not kind or type(name) ~= 'string' or type(ev.name) ~= 'string' then return 0 end
if ev.object.kind == 'ReplicaSet' then
  -- a ReplicaSet of an app is named {app}-{pod template hash}
  name = string.match(name, '^(.+)%-[a-z0-9]+$')
  if not name then return 0 end
end
local function str(v) if type(v) == 'string' then return v end return '' end
local function order(ms, id) return string.format('%013d', 9999999999999 - ms) .. '|' .. id end
if last < first then last = first end
local cutoff = now - max_age
if last < cutoff then return 0 end

local fold = table.concat({str(ev.cluster), kind, name, str(ev.object.uid), str(ev.type),
                           str(ev.reason), str(ev.message)}, '\n')
local hash = redis.sha1hex(fold)
local id = str(ev.cluster) .. '/' .. name .. '.' .. string.sub(hash, 1, 16)
if #id > 128 then id = str(ev.cluster) .. '/' .. hash end

local e
local old = redis.call('HGET', KEYS[1], id)
if old then
  local dok, d = pcall(cjson.decode, old)
  if dok and type(d) == 'table' then e = d end
end
local changed = false
if not e then
  e = {id = id, type = str(ev.type), reason = str(ev.reason), message = str(ev.message),
       object = {kind = kind, name = name}, cluster = str(ev.cluster), zone = str(ev.zone),
       _src = {}, _srcn = 0, _carry = 0, _f = first, _l = last}
  if type(ev.source) == 'string' then e.source = ev.source end
  changed = true
end
local app = e.app
if type(app) ~= 'string' then
  if kind == 'App' then
    app = name
  elseif kind == 'Pod' then
    local pod = redis.call('HGET', KEYS[3], name)
    if pod then
      local pok, p = pcall(cjson.decode, pod)
      if pok and type(p) == 'table' and type(p.app) == 'string' then app = p.app end
    end
  end
  if type(app) == 'string' then e.app = app; changed = true end
end

local count = tonumber(ev.count) or 1
if count < 1 then count = 1 end
if e._src[ev.name] ~= count then
  if e._src[ev.name] == nil then
    if e._srcn >= 32 then
      for _, c in pairs(e._src) do e._carry = e._carry + c end
      e._src = {}
      e._srcn = 0
    end
    e._srcn = e._srcn + 1
  end
  e._src[ev.name] = count
  changed = true
end
local total = e._carry
for _, c in pairs(e._src) do total = total + c end
e.count = total

local old_last = tonumber(e._l)
if first < tonumber(e._f) then e._f = first; changed = true end
if last > old_last then e._l = last; changed = true end
if not changed then return 0 end
redis.call('HSET', KEYS[1], id, cjson.encode(e))
if old and old_last ~= e._l then redis.call('ZREM', KEYS[2], order(old_last, id)) end
redis.call('ZADD', KEYS[2], 0, order(e._l, id))

-- retention: by age, then by count (a bounded amount of work per call; it converges)
local function drop(members)
  for _, m in ipairs(members) do
    redis.call('ZREM', KEYS[2], m)
    redis.call('HDEL', KEYS[1], string.sub(m, 15))
  end
end
drop(redis.call('ZRANGEBYLEX', KEYS[2], '(' .. string.format('%013d', 9999999999999 - cutoff),
                '+', 'LIMIT', 0, 64))
local n = redis.call('ZCARD', KEYS[2])
if n > max_n then drop(redis.call('ZRANGE', KEYS[2], max_n, max_n + 63)) end
return 1
