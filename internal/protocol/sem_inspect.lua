-- Read a semaphore's state in one atomic step.
-- KEYS[1] to KEYS[7] and the slots' keys after them as for sem_acquire.lua; ARGV[1] N, ARGV[2] how many of the queue's
-- first waiters to list.
-- Returns {permits or false, values, pttls, counters, queue length, ids,
-- tickets}: per slot its lock's value (false when free), its pttl and its
-- counter (false when missing); the queue's first ARGV[2] waiters and
-- their tickets (false when missing).
local n = tonumber(ARGV[1])
local vals, pttls, ctrs = {}, {}, {}
for i = 0, n - 1 do
  vals[i + 1] = redis.call('GET', KEYS[8 + 3 * i])
  pttls[i + 1] = redis.call('PTTL', KEYS[8 + 3 * i])
  ctrs[i + 1] = redis.call('GET', KEYS[9 + 3 * i])
end
local ids = redis.call('ZRANGE', KEYS[4], 0, tonumber(ARGV[2]) - 1)
local ts = {}
if #ids > 0 then
  ts = redis.call('HMGET', KEYS[5], unpack(ids))
end
return {redis.call('GET', KEYS[7]), vals, pttls, ctrs, redis.call('ZCARD', KEYS[4]), ids, ts}
