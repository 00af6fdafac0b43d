-- Make seq a lock's token on one node: lift the counter to at least seq
-- (atomic max, under the counter rule) and, if holder has the lock there,
-- store seq as its token's Seq (ttl kept). Redlock's quorum write-back,
-- after an acquire, refresh or reissue, so that the node's counter and lock
-- agree with the lease's token.
-- KEYS[1] lock, KEYS[2] counter, KEYS[3] ahead; ARGV[1] holder id, ARGV[2] seq,
-- ARGV[3] counter ttl ms ('0': forever).
-- A seq that would lift the counter more than MAX_AHEAD above the clock is
-- refused. Returns the counter afterwards.
local now = clock_us()
local seq = tonumber(ARGV[2])
if seq > MAX_SEQ then
  return redis.error_reply('fencelock: seq past 2^53-1')
end
local c, present = counter_now(now)
if c < seq then
  local err = too_far(seq, now)
  if err then
    return err
  end
end
if c < seq or not present then
  c = math.max(c, seq)
  store_counter(c, ARGV[3], now)
end
if holds(redis.call('GET', KEYS[1]), ARGV[1]) then
  redis.call('SET', KEYS[1], ARGV[1] .. ':' .. fmt(seq), 'KEEPTTL')
end
return c
