-- check.lua: the start of every fenced script. It compares the token with
-- the resource's high-water and returns {0, seq, holder} (the high-water)
-- when the token is rejected. The script that follows it makes its write
-- and then calls advance() to raise the high-water, so a write that raises
-- an error leaves the high-water as it was.
--
-- KEYS[1]  the resource's high-water: a hash {seq, holder}
-- ARGV[1]  the token's seq, decimal, 1..2^53-1 (exact in a Lua number)
-- ARGV[2]  the token's holder
local hw = KEYS[1]
local seq = tonumber(ARGV[1])
local holder = ARGV[2]

local high = redis.call('HMGET', hw, 'seq', 'holder')
if high[1] then
  local highSeq = tonumber(high[1])
  if not highSeq or not high[2] then
    return redis.error_reply('fencelock: high-water ' .. hw .. ' is corrupt')
  end
  if seq < highSeq or (seq == highSeq and holder ~= high[2]) then
    return {0, high[1], high[2]}
  end
end

local function advance()
  redis.call('HSET', hw, 'seq', ARGV[1], 'holder', holder)
end
