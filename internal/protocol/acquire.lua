-- Try to take a lock (not fair: whoever asks first gets a free lock).
-- KEYS[1] lock, KEYS[2] counter, KEYS[3] ahead.
-- ARGV[1] holder id, ARGV[2] ttl ms, ARGV[3] counter ttl ms ('0': forever),
-- ARGV[4] '1' to lift the counter to the clock first,
-- ARGV[5] '0' for an unfenced lock: no counter, Seq 0.
-- Replies (see TryResult): {1, seq} acquired; {2, seq} the holder had it
-- already (its ttl is reset); {0, pttl} another holder has it.
-- One MGET reads the lock, its counter and the ahead key: the uncontended
-- path runs MGET, SET and SET (and TIME when the counter is missing or
-- may be above the clock).
local lc = redis.call('MGET', KEYS[1], KEYS[2], KEYS[3])
local seq, taken = holds(lc[1], ARGV[1])
if seq then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {2, tonumber(seq)}
end
if taken then
  return {0, redis.call('PTTL', KEYS[1])}
end
if ARGV[5] ~= '0' then
  return take(ARGV[1], ARGV[2], ARGV[3], ARGV[4], lc[2], nil, lc[3])
end
redis.call('SET', KEYS[1], ARGV[1] .. ':0', 'PX', ARGV[2])
return {1, 0}
