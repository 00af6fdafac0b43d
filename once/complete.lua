-- complete.lua: the body of a redisverifier script (it runs only for a
-- token the high-water accepts, that is, when no newer holder has claimed
-- since): mark the period done, from the claim's server time on.
--
-- KEYS[1]  the job's state (see claim.lua)
-- ARGV[1]  the window in µs: the period less the tolerance
-- ARGV[2]  the key's ttl in ms, counted from now
-- Returns {1, done_until}, or {0} when this token made no claim (or its
-- claim was forgotten: the key expired).
local claim = redis.call('HMGET', KEYS[1], 'claim', 'claimed_at')
if claim[1] ~= FENCE_SEQ .. ':' .. FENCE_HOLDER or not claim[2] then
  return {0}
end
local done = tonumber(claim[2]) + tonumber(ARGV[1])
redis.call('HSET', KEYS[1], 'done_until', string.format('%.0f', done), 'done_by', claim[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return {1, done}
