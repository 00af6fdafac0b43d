-- move.lua: bind a resource to another lock and forget its high-water, if
-- it is bound to the lock it moves from, or to none. Returns {1} when it
-- moved, {0, lock} when the resource is bound to a third lock.
--
-- KEYS[1]  the resource's high-water hash
-- ARGV[1]  from
-- ARGV[2]  to
local lock = redis.call('HGET', KEYS[1], 'lock')
if lock and lock ~= ARGV[1] then
  return {0, lock}
end
redis.call('HSET', KEYS[1], 'seq', '0', 'holder', '', 'lock', ARGV[2])
return {1}
