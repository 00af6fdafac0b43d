-- Read a lock's state in one atomic step.
-- KEYS[1] lock, KEYS[2] counter, KEYS[3] ahead, KEYS[4] queue,
-- KEYS[5] tickets, KEYS[6] waiting; no ARGV.
-- Returns {value or false, pttl, counter or false, queue length, the
-- queue's head or false, its ticket or false}.
local head = redis.call('ZRANGE', KEYS[4], 0, 0)[1]
local ticket = head and redis.call('HGET', KEYS[5], head)
return {redis.call('GET', KEYS[1]), redis.call('PTTL', KEYS[1]), redis.call('GET', KEYS[2]), redis.call('ZCARD', KEYS[4]), head or false, ticket or false}
