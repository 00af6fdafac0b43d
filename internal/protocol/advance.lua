-- Lift a counter to at least a floor (atomic max), under the counter rule.
-- KEYS[1] lock (unused: it keeps the call in the lock's slot), KEYS[2] counter,
-- KEYS[3] ahead.
-- ARGV[1] floor, ARGV[2] counter ttl ms ('0': forever).
-- A missing counter stands at the clock (see counter_now). A floor that
-- would lift it more than MAX_AHEAD above the clock is refused.
-- Returns the counter's value afterwards.
local now = clock_us()
local c, present = counter_now(now)
local floor = tonumber(ARGV[1])
if floor > MAX_SEQ then
  return redis.error_reply('fencelock: floor past 2^53-1')
end
if c < floor or not present then
  if c < floor then
    local err = too_far(floor, now)
    if err then
      return err
    end
  end
  c = math.max(c, floor)
  store_counter(c, ARGV[2], now)
end
return c
