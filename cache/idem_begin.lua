-- cache/idem_begin.lua: the start of a write carrying an Idempotency-Key (cache/SCHEMA.md, fg:idem).
-- KEYS[1] fg:idem:{id}   ARGV: fingerprint of the request (method, path, body), pending ttl (ms)
-- Returns {0} when this request is the first with the key (a pending record is made: run it),
-- {1} when the first one is still in progress, {2} when the key was used with another request,
-- {3} when the first one finished: its answer is in the hash (status, body, etag, location).
local fp, ttl = ARGV[1], tonumber(ARGV[2])
local state = redis.call('HMGET', KEYS[1], 'state', 'fp')
if not state[1] then
  redis.call('HSET', KEYS[1], 'state', 'pending', 'fp', fp)
  redis.call('PEXPIRE', KEYS[1], ttl)
  return {0}
end
if state[2] ~= fp then return {2} end
if state[1] == 'pending' then return {1} end
return {3}
