-- cache/cache_swap.lua: the end of a relist. The new objects of one (kind, cluster) were
-- written under a temporary prefix; this renames them over the canonical keys and deletes the
-- canonical keys of scopes (and, for pods, apps) that no longer hold anything, in one script,
-- so a reader sees the old set or the new one, never a mix.
-- Temporary keys (PREFIX = ARGV[3]): PREFIX..'o:'..scope, PREFIX..'i:'..scope, PREFIX..'s'
-- (the scopes), for pods PREFIX..'a:'..scope..':'..app and PREFIX..'ax' (the scope:app pairs).
-- KEYS[1] fg:rv:{cluster}:{resource}   KEYS[2] fg:sync:{cluster}:{resource}
-- ARGV: kind, cluster, prefix, resourceVersion, now (Unix ms), object count
-- Returns the number of scopes now cached.
local kind, cluster, tmp, rv, now, count = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6]
local base = kind .. ':' .. cluster .. ':'
local skey = 'fg:s:' .. kind .. ':' .. cluster
local function swap_sets(canon, tmpset, drop, move)
  local new = redis.call('SMEMBERS', tmpset)
  local keep = {}
  for _, m in ipairs(new) do keep[m] = true end
  for _, m in ipairs(redis.call('SMEMBERS', canon)) do
    if not keep[m] then drop(m) end
  end
  for _, m in ipairs(new) do move(m) end
  if #new > 0 then
    redis.call('RENAME', tmpset, canon)
    redis.call('PERSIST', canon)
  else
    redis.call('DEL', canon, tmpset)
  end
  return #new
end
local function mv(from, to)
  redis.call('RENAME', from, to)
  redis.call('PERSIST', to)
end
local n = swap_sets(skey, tmp .. 's',
  function(sc) redis.call('DEL', 'fg:o:' .. base .. sc, 'fg:i:' .. base .. sc) end,
  function(sc)
    mv(tmp .. 'o:' .. sc, 'fg:o:' .. base .. sc)
    mv(tmp .. 'i:' .. sc, 'fg:i:' .. base .. sc)
  end)
if kind == 'pod' then
  swap_sets('fg:ax:' .. cluster, tmp .. 'ax',
    function(pa) redis.call('DEL', 'fg:a:' .. cluster .. ':' .. pa) end,
    function(pa) mv(tmp .. 'a:' .. pa, 'fg:a:' .. cluster .. ':' .. pa) end)
end
redis.call('SET', KEYS[1], rv)
redis.call('HSET', KEYS[2], 'state', 'Synced', 'objects', count, 'rv', rv, 'lastSyncMs', now,
  'lastError', '')
redis.call('HINCRBY', KEYS[2], 'relists', 1)
return n
