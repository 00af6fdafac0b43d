-- Release a lease if the holder still has it, and wake the waiters.
-- KEYS[1] lock key; ARGV[1] holder id; ARGV[2] wake-up channel.
-- Returns 1 when released, 0 when the lock is gone or held by another.
local v = redis.call('GET', KEYS[1])
local prefix = ARGV[1] .. ':'
if v and string.sub(v, 1, #prefix) == prefix then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', ARGV[2], '1')
  return 1
end
return 0
