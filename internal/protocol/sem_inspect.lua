-- Read a semaphore's state in one atomic step.
-- KEYS[1] to KEYS[7] as for sem_acquire.lua; ARGV[1] N, ARGV[2] how many of the queue's
-- first waiters to list.
-- Returns {permits or false, values, pttls, counters, queue length, ids,
-- tickets}: per slot its lock's value (false when free), its pttl and its
-- counter (false when missing); the queue's first ARGV[2] waiters and
-- their tickets (false when missing).
local n = tonumber(ARGV[1])
local vals, pttls, ctrs = {}, {}, {}
local base = string.sub(KEYS[7], 1, -8) -- PREFIX{NAME}#, as in slot.lua
for i = 0, n - 1 do
  local k = base .. i
  vals[i + 1] = redis.call('GET', k)
  pttls[i + 1] = redis.call('PTTL', k)
  ctrs[i + 1] = redis.call('GET', k .. ':fence')
end
local ids = redis.call('ZRANGE', KEYS[4], 0, tonumber(ARGV[2]) - 1)
local ts = {}
if #ids > 0 then
  ts = redis.call('HMGET', KEYS[5], unpack(ids))
end
return {redis.call('GET', KEYS[7]), vals, pttls, ctrs, redis.call('ZCARD', KEYS[4]), ids, ts}
