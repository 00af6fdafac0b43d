-- reset.lua: set a resource's high-water and lock, whatever they were (an
-- operator's way back from a poisoned high-water).
--
-- KEYS[1]  the resource's high-water hash
-- ARGV[1]  seq, decimal
-- ARGV[2]  holder ('' for none)
-- ARGV[3]  lock
redis.call('HSET', KEYS[1], 'seq', ARGV[1], 'holder', ARGV[2], 'lock', ARGV[3])
return 1
