-- cache/ratelimit.lua: fleetgate's rate limiter, one script called with EVALSHA by
-- src/auth/ratelimit.c (which embeds this file at build time). All numbers are integers
-- (microseconds, milli-units), so the arithmetic is exact in Lua's doubles.
--
-- Time is Redis's (TIME), so replicas whose clocks differ still share one limit.
--
-- ARGV[1] names the operation:
--
-- gcra     KEYS: one or two buckets (the caller's, and the project's when there is one).
--          ARGV: 'gcra', cost_milli, force ('0'|'1'), refund_milli, extra_milli, then for each
--          key: interval_us, burst.
--          GCRA (generic cell rate algorithm): a bucket is one number, its theoretical arrival
--          time TAT. A call of cost c (in reads; c*interval microseconds) passes when, for every
--          bucket, max(TAT, now) + c*interval - now <= burst*interval; then every bucket moves
--          (all or none, so a refused call costs nothing). With force = '1' the buckets move
--          even when over: that charges the rest of a list call after its items are counted.
--          refund_milli gives back cells a replica reserved earlier and did not use; extra_milli
--          asks to reserve that much more ahead (granted only when it fits every bucket, else the
--          call is charged alone).
--          Reply: {allowed, limit, remaining, reset_s, retry_after_s, granted_extra_milli,
--          retry_after_us}, for the tightest bucket; retry_after_us is the exact wait (a refused
--          caller is answered by the replica itself until then, without asking again).
-- acquire  KEYS[1]: the caller's set of open streams (member: lease id, score: expiry in ms).
--          ARGV: 'acquire', lease_id, max, lease_ms. Expired leases are dropped first.
--          Reply: {allowed, max, remaining, 0, retry_after_s}.
-- renew    KEYS[1]; ARGV: 'renew', lease_id, lease_ms. Reply: {1} when the lease was held.
-- release  KEYS[1]; ARGV: 'release', lease_id. Reply: {1} when the lease was held.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local op = ARGV[1]

if op == 'gcra' then
  local cost_milli = tonumber(ARGV[2])
  local force = ARGV[3] == '1'
  local refund_milli = tonumber(ARGV[4])
  local extra_milli = tonumber(ARGV[5])
  local tats, intervals, bursts = {}, {}, {}
  for i = 1, #KEYS do
    intervals[i] = tonumber(ARGV[4 + 2 * i])
    bursts[i] = tonumber(ARGV[5 + 2 * i])
    local tat = tonumber(redis.call('GET', KEYS[i])) or now
    -- cells reserved earlier and not used go back first (rounded down: never more than taken)
    tat = tat - math.floor(refund_milli * intervals[i] / 1000)
    if tat < now then
      tat = now
    end
    tats[i] = tat
  end
  local function fits(c)
    for i = 1, #KEYS do
      if tats[i] + math.ceil(c * intervals[i] / 1000) - now > bursts[i] * intervals[i] then
        return false
      end
    end
    return true
  end
  local granted = 0
  if extra_milli > 0 and fits(cost_milli + extra_milli) then
    granted = extra_milli
  end
  local charge = cost_milli + granted
  local allowed = 1
  if not fits(charge) then
    allowed = 0
  end
  local new_tats = {}
  local limit, remaining, reset, retry, retry_us = 0, -1, 0, 0, 0
  for i = 1, #KEYS do
    local interval, burst = intervals[i], bursts[i]
    local new_tat = tats[i] + math.ceil(charge * interval / 1000)
    local tolerance = burst * interval
    local over = new_tat - now - tolerance
    local left
    if over > 0 then
      left = 0
      local wait = math.ceil(over / 1000000)
      if wait > retry then
        retry = wait
      end
      if over > retry_us then
        retry_us = over
      end
    else
      left = math.floor((tolerance - (new_tat - now)) / interval)
    end
    new_tats[i] = new_tat
    if remaining < 0 or left < remaining then
      limit, remaining, reset = burst, left, math.ceil((new_tat - now) / 1000000)
    end
  end
  for i = 1, #KEYS do
    local tat = nil
    if allowed == 1 or force then
      tat = new_tats[i]
    elseif refund_milli > 0 then
      tat = tats[i]
    end
    if tat then
      local ttl_ms = math.ceil((tat - now) / 1000) + 1000
      redis.call('SET', KEYS[i], string.format('%d', tat), 'PX', ttl_ms)
    end
  end
  if allowed == 0 then
    retry = math.max(retry, 1)
  end
  return {allowed, limit, remaining, reset, retry, granted, retry_us}
elseif op == 'acquire' then
  local id, max, lease_ms = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
  local now_ms = math.floor(now / 1000)
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now_ms)
  local n = redis.call('ZCARD', KEYS[1])
  if n >= max then
    local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
    local wait = math.ceil((tonumber(first[2]) - now_ms) / 1000)
    if wait < 1 then
      wait = 1
    end
    return {0, max, 0, 0, wait}
  end
  redis.call('ZADD', KEYS[1], now_ms + lease_ms, id)
  redis.call('PEXPIRE', KEYS[1], lease_ms + 1000)
  return {1, max, max - n - 1, 0, 0}
elseif op == 'renew' then
  local id, lease_ms = ARGV[2], tonumber(ARGV[3])
  if not redis.call('ZSCORE', KEYS[1], id) then
    return {0}
  end
  redis.call('ZADD', KEYS[1], math.floor(now / 1000) + lease_ms, id)
  redis.call('PEXPIRE', KEYS[1], lease_ms + 1000)
  return {1}
elseif op == 'release' then
  return {redis.call('ZREM', KEYS[1], ARGV[2])}
end
return redis.error_reply('ratelimit.lua: unknown operation')
