-- check.lua: the start of every fenced script. It refuses a token of
-- another lock than the one the resource is bound to ({2, lock}) and a
-- stale one ({0, seq, holder}: the high-water). The script that follows it
-- makes its write and then calls advance() to raise the high-water and
-- bind the resource to the token's lock, so a write that raises an error
-- leaves both as they were.
--
-- KEYS[1]  the resource's high-water: a hash {seq, holder, lock}; a hash
--          written before locks were recorded has no lock, and adopts the
--          lock of the first token it accepts
-- ARGV[1]  the token's seq, decimal, 1..2^53-1 (exact in a Lua number)
-- ARGV[2]  the token's holder
-- ARGV[3]  the token's lock (fence.Token.Key)
local hw = KEYS[1]
local seq = tonumber(ARGV[1])
local holder = ARGV[2]
local lock = ARGV[3]

local high = redis.call('HMGET', hw, 'seq', 'holder', 'lock')
if high[3] and high[3] ~= lock then
  return {2, high[3]}
end
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
  redis.call('HSET', hw, 'seq', ARGV[1], 'holder', holder, 'lock', lock)
end
