-- highest.lua: the high-water of one resource and its lock,
-- {seq, holder, lock}, with false for what is missing.
return redis.call('HMGET', KEYS[1], 'seq', 'holder', 'lock')
