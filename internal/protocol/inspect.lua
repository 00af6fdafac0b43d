-- Read a lock's state in one atomic step.
-- KEYS[1] lock, KEYS[2] counter, KEYS[3] queue; no ARGV.
-- Returns {value or false, pttl, counter or false, queue length}.
return {redis.call('GET', KEYS[1]), redis.call('PTTL', KEYS[1]), redis.call('GET', KEYS[2]), redis.call('ZCARD', KEYS[3])}
