-- Release a lock (not fair) if the holder still has it, and wake a waiter.
-- KEYS[1] lock; ARGV[1] holder id, ARGV[2] channel, ARGV[3] '1' for SPUBLISH.
-- Publishes "" (a plain release: it wakes one waiter per subscribed client).
-- Returns 1 when released, 0 when the lock is gone or held by another.
local v = redis.call('GET', KEYS[1])
local n = #ARGV[1]
if not v or string.byte(v, n + 1) ~= 58 or string.sub(v, 1, n) ~= ARGV[1] then -- 58 is ':'
  return 0
end
redis.call('DEL', KEYS[1])
publish(ARGV[2], '', ARGV[3])
return 1
