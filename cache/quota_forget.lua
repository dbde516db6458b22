-- cache/quota_forget.lua: an object of a tier quota was deleted (cache/SCHEMA.md section 2,
-- fg:q): its quota is free at once, on every replica. In one step, so no check runs between:
-- its reservation goes, and a tombstone "!name" tells quota_reserve.lua not to count what the
-- cache, or the tier's kept usage (fg:qu, up to 1 s old), still shows of it until ttl has passed
-- or the name is reserved again. The kept usage itself stays: the tombstone already discounts
-- the object in it, so the next check after a delete is still one round trip.
-- KEYS[1] fg:q:{project}:{tier}; ARGV: now (ms), ttl (ms), name.
local now, ttl, name = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3]
redis.call('HDEL', KEYS[1], name)
redis.call('HSET', KEYS[1], '!' .. name, string.format('0,0,0,%d', now + ttl))
if redis.call('PTTL', KEYS[1]) < ttl * 2 then
  redis.call('PEXPIRE', KEYS[1], ttl * 2)
end
return {1}
