-- cache/quota_reserve.lua: the atomic check-and-reserve of a project's tier quota
-- (cache/SCHEMA.md section 2, fg:q). Replicas of fleetgate racing for the last unit of a quota
-- run this one at a time in Redis, so they cannot both win.
-- KEYS[1] fg:q:{project}:{tier}: hash, app -> "cpuMilli,memoryBytes,pods,expiresMs"
-- KEYS[2] fg:qu:{project}:{tier}: string, the last usage a caller read from the cache (below)
-- ARGV: now (ms), ttl (ms), app, want cpu, memory, pods, limit cpu, memory, pods (-1: none),
--       then what the cache shows now of the tier's job sets, as one string
--       "name,cpu,mem,pods;name,cpu,mem,pods;..." (one argument, however many), then the same of
--       the tier's apps and how long (ms) to keep that string in KEYS[2] for the next callers;
--       or instead of those two the word 'kept' (or nothing): then the kept string is used, and
--       {-1} is returned when there is none (the caller then reads the cache and calls again
--       with it). Summing every app of the tier from the cache on every write cost more than the
--       write; a kept usage is at most that old, and an app written in that time is counted by
--       its reservation anyway.
-- Guarded, when more than two KEYS are given: a create sends this with its first reads, before
-- it has read the project, so that a create is one round trip fewer. KEYS[3..] are, for each of
-- the N member clusters in turn, the project's objects hash fg:o:project:{cluster}:_, the
-- project's apps hash and its job sets hash; ARGV[13] is the project, ARGV[14] the app, and
-- ARGV[14 + c] the version of cluster c's project object the caller took the limits from ('' for
-- none). Nothing is done and {-2} is returned unless every project object still has that version
-- (the limits are the project's), no cluster holds the app (a create of an app that exists is
-- refused before any quota) and the project has no job sets (their usage must be read); the
-- caller then reads and calls again, as for {-1}.
-- An app is counted once: by its live reservation when it has one (a write in flight, or one
-- that landed less than ttl ago), else by what the cache shows of it. A field "!app" (written by
-- quota_forget.lua when the app was deleted, "0,0,0,expiresMs") says the app is gone: what the
-- cache or a kept usage still shows of it is not counted until it expires or the app is
-- reserved again.
-- Returns {1} when reserved (the reservation replaces the app's previous one), or
-- {0, resource (1 cpu, 2 memory, 3 pods), would-be usage, limit} when the quota would be passed.
local now, ttl, me = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3]
local want = {tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])}
local lim = {tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9])}
local n = (#KEYS - 2) / 3
for c = 1, n do
  local o = redis.call('HGET', KEYS[3 * c], ARGV[13])
  local v = o and string.match(o, '"version":"([^"]*)"') or ''
  if v ~= ARGV[14 + c] or redis.call('HEXISTS', KEYS[3 * c + 1], ARGV[14]) == 1 or
     redis.call('HLEN', KEYS[3 * c + 2]) > 0 then
    return {-2}
  end
end
local seen = ARGV[11]
if seen == nil or seen == 'kept' then
  seen = redis.call('GET', KEYS[2])
  if not seen then
    return {-1}
  end
elseif tonumber(ARGV[12] or '0') > 0 then
  redis.call('SET', KEYS[2], seen, 'PX', ARGV[12])
end
local used, held, gone = {0, 0, 0}, {}, {}
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all, 2 do
  local name, v = all[i], all[i + 1]
  local c, m, p, exp = string.match(v, '^(%d+),(%d+),(%d+),(%d+)$')
  if c == nil or tonumber(exp) <= now then
    redis.call('HDEL', KEYS[1], name)
  elseif string.sub(name, 1, 1) == '!' then
    gone[string.sub(name, 2)] = true
  elseif name ~= me then
    held[name] = true
    used[1], used[2], used[3] = used[1] + tonumber(c), used[2] + tonumber(m), used[3] + tonumber(p)
  end
end
for _, list in ipairs({ARGV[10] or '', seen}) do
  for name, c, m, p in string.gmatch(list, '([^,;]+),(%d+),(%d+),(%d+)') do
    if name ~= me and not held[name] and not gone[name] then
      used[1], used[2], used[3] = used[1] + tonumber(c), used[2] + tonumber(m), used[3] + tonumber(p)
    end
  end
end
for r = 1, 3 do
  if lim[r] >= 0 and used[r] + want[r] > lim[r] then
    return {0, r, used[r] + want[r], lim[r]}
  end
end
redis.call('HDEL', KEYS[1], '!' .. me)
redis.call('HSET', KEYS[1], me, string.format('%d,%d,%d,%d', want[1], want[2], want[3], now + ttl))
redis.call('PEXPIRE', KEYS[1], ttl * 2)
return {1}
