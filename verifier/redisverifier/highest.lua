-- highest.lua: the high-water of one resource, {seq, holder} or {false, false}.
return redis.call('HMGET', KEYS[1], 'seq', 'holder')
