-- Read a lock's state in one atomic step.
-- KEYS[1] lock key, KEYS[2] counter key.
-- Returns {value or false, pttl, counter or false}.
return {redis.call('GET', KEYS[1]), redis.call('PTTL', KEYS[1]), redis.call('GET', KEYS[2])}
