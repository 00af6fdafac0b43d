-- Extend a lease if the holder still has it, with the token it knows.
-- KEYS[1] lock key; ARGV[1] holder id; ARGV[2] ttl in ms; ARGV[3] the
-- token's Seq, or '' for any Seq of this holder. Matching the Seq matters
-- after a handoff read late: the lock may have been handed to the same
-- holder again since, with a newer token, and refreshing the old one would
-- return a lease whose token is behind.
-- Returns 1 when extended, 0 when the lock is gone or held by another.
local v = redis.call('GET', KEYS[1])
local prefix = ARGV[1] .. ':'
if v and string.sub(v, 1, #prefix) == prefix and (ARGV[3] == '' or string.sub(v, #prefix + 1) == ARGV[3]) then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
