-- Acquire a lease: one round trip, atomic.
-- KEYS[1] lock key, KEYS[2] counter key
-- ARGV[1] holder id, ARGV[2] ttl in ms,
-- ARGV[3] "1" to lift the counter to Redis TIME in microseconds first (clock floor),
-- ARGV[4] counter ttl in ms ("0": the counter never expires),
-- ARGV[5] "1" when the holder may already hold the lock (re-acquire after a restart),
-- ARGV[6] "1" for an unfenced lock: no counter is read or written and seq is 0
-- (redlock without quorum fencing, an efficiency lock).
-- The lock's value is "holder:seq", so a re-acquire can return the same token.
-- Returns {1, seq} when acquired, {2, seq} when re-acquired (same token, ttl reset),
-- {0, pttl} when another holder has it.
local v = redis.call('GET', KEYS[1])
if v then
  if ARGV[5] == '1' then
    local prefix = ARGV[1] .. ':'
    if string.sub(v, 1, #prefix) == prefix then
      redis.call('PEXPIRE', KEYS[1], ARGV[2])
      return {2, tonumber(string.sub(v, #prefix + 1))}
    end
  end
  return {0, redis.call('PTTL', KEYS[1])}
end
if ARGV[6] == '1' then
  redis.call('SET', KEYS[1], ARGV[1] .. ':0', 'PX', ARGV[2])
  return {1, 0}
end
if ARGV[3] == '1' then
  local t = redis.call('TIME')
  local floor = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local c = tonumber(redis.call('GET', KEYS[2]) or '0')
  if c < floor then
    redis.call('SET', KEYS[2], floor)
  end
end
local seq = redis.call('INCR', KEYS[2])
if seq > 9007199254740991 then
  return redis.error_reply('fencelock: counter past 2^53-1')
end
if ARGV[4] ~= '0' then
  redis.call('PEXPIRE', KEYS[2], ARGV[4])
end
redis.call('SET', KEYS[1], ARGV[1] .. ':' .. seq, 'PX', ARGV[2])
return {1, seq}
