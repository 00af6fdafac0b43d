-- Make seq a lock's token on one node: lift the counter to at least seq
-- (atomic max, ttl kept) and, if holder has the lock there, store seq as its
-- token's Seq (ttl kept). Redlock's quorum write-back, after an acquire,
-- refresh or reissue, so that the node's counter and lock agree with the
-- lease's token.
-- KEYS[1] lock key, KEYS[2] counter key; ARGV[1] holder id, ARGV[2] seq.
-- Returns the counter afterwards.
local seq = tonumber(ARGV[2])
local c = tonumber(redis.call('GET', KEYS[2]) or '0')
if c < seq then
  redis.call('SET', KEYS[2], ARGV[2], 'KEEPTTL')
  c = seq
end
local v = redis.call('GET', KEYS[1])
local prefix = ARGV[1] .. ':'
if v and string.sub(v, 1, #prefix) == prefix then
  redis.call('SET', KEYS[1], prefix .. ARGV[2], 'KEEPTTL')
end
return c
