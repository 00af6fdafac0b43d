-- claim.lua: the body of a redisverifier script (it runs only for a token
-- the high-water accepts, and raises the high-water after it): claim the
-- period for this token, unless a run completed for it already.
--
-- KEYS[1]  the job's state: a hash {claim, claimed_at, done_until, done_by}
-- ARGV[1]  the key's ttl in ms, so that an abandoned claim does not stay
-- Returns {0, done_until, now} when done (server µs), else {1, now}.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local done = tonumber(redis.call('HGET', KEYS[1], 'done_until') or '0')
if now < done then
  return {0, done, now}
end
-- '%.0f' writes the whole microseconds (exact below 2^53), never "1.8e+15".
redis.call('HSET', KEYS[1], 'claim', FENCE_SEQ .. ':' .. FENCE_HOLDER, 'claimed_at', string.format('%.0f', now))
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return {1, now}
