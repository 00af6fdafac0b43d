-- Extend a lease if the holder still has it.
-- KEYS[1] lock key; ARGV[1] holder id; ARGV[2] ttl in ms.
-- Returns 1 when extended, 0 when the lock is gone or held by another.
local v = redis.call('GET', KEYS[1])
local prefix = ARGV[1] .. ':'
if v and string.sub(v, 1, #prefix) == prefix then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
