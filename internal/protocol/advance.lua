-- Lift a counter to at least a floor (atomic max); keeps the counter's ttl.
-- KEYS[1] counter key; ARGV[1] floor.
-- Returns the counter's value afterwards.
local floor = tonumber(ARGV[1])
local c = tonumber(redis.call('GET', KEYS[1]) or '0')
if c < floor then
  redis.call('SET', KEYS[1], ARGV[1], 'KEEPTTL')
  return floor
end
return c
