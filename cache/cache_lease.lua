-- cache/cache_lease.lua: an informer lease (fg:lease:{cluster}:{resource}).
-- KEYS[1] the lease; ARGV: replica id, lease time (ms), mode ('take' or 'release').
-- take: held by this replica -> extended; free -> taken; held by another -> 0.
-- release: deleted only when this replica holds it.
local cur = redis.call('GET', KEYS[1])
if ARGV[3] == 'release' then
  if cur == ARGV[1] then redis.call('DEL', KEYS[1]) return 1 end
  return 0
end
if cur == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
if not cur then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
return 0
