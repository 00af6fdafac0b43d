-- Give the current holder a new, higher token without letting go of the
-- lock: lift the counter to at least a floor, add one, and store the new Seq
-- in the lock's value (ttl kept). Used to heal after the counter went
-- backwards. The counter is lifted to the floor even when the holder no
-- longer has the lock: counters only grow, and the next holder's token is
-- then above the storage's highest Seq.
-- KEYS[1] lock, KEYS[2] counter, KEYS[3] ahead; ARGV[1] holder id, ARGV[2] floor,
-- ARGV[3] counter ttl ms ('0': forever).
-- A floor that would lift the counter more than MAX_AHEAD above the clock
-- is refused. Returns the new Seq, or 0 when the holder no longer has the
-- lock.
if tonumber(ARGV[2]) > MAX_SEQ then
  return redis.error_reply('fencelock: floor past 2^53-1')
end
local now = clock_us()
local c = counter_now(now)
if tonumber(ARGV[2]) > c then
  local err = too_far(tonumber(ARGV[2]), now)
  if err then
    return err
  end
  c = tonumber(ARGV[2])
end
if not holds(redis.call('GET', KEYS[1]), ARGV[1]) then
  store_counter(c, ARGV[3], now)
  return 0
end
local seq = c + 1
if seq > MAX_SEQ then
  return redis.error_reply('fencelock: counter past 2^53-1')
end
store_counter(seq, ARGV[3], now)
redis.call('SET', KEYS[1], ARGV[1] .. ':' .. fmt(seq), 'KEEPTTL')
return seq
