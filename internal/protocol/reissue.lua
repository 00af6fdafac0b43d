-- Give the current holder a new, higher token without letting go of the lock:
-- lift the counter to at least a floor, INCR it, and store the new Seq in the
-- lock's value (ttl kept). Used to heal after the counter went backwards.
-- The counter is lifted to the floor even when the holder no longer has the
-- lock: that is harmless (counters only grow) and gives the next holder a
-- token above the storage's highest Seq.
-- KEYS[1] lock key, KEYS[2] counter key; ARGV[1] holder id, ARGV[2] floor.
-- Returns the new Seq, or 0 when the holder no longer has the lock.
local floor = tonumber(ARGV[2])
local c = tonumber(redis.call('GET', KEYS[2]) or '0')
if c < floor then
  redis.call('SET', KEYS[2], ARGV[2], 'KEEPTTL')
end
local v = redis.call('GET', KEYS[1])
local prefix = ARGV[1] .. ':'
if not v or string.sub(v, 1, #prefix) ~= prefix then
  return 0
end
local seq = redis.call('INCR', KEYS[2])
if seq > 9007199254740991 then
  return redis.error_reply('fencelock: counter past 2^53-1')
end
redis.call('SET', KEYS[1], prefix .. string.format('%d', seq), 'KEEPTTL')
return seq
