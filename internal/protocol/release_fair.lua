-- Release a fair lock if the holder still has it, and hand it on.
-- KEYS[1] lock, KEYS[2] counter, KEYS[3] ahead, KEYS[4] queue,
-- KEYS[5] tickets, KEYS[6] waiting; for a semaphore's slot KEYS[7]
-- permits.
-- ARGV[1] holder id, ARGV[2] channel, ARGV[3] counter ttl ms, ARGV[4] '1'
-- to lift the counter to the clock, ARGV[5] '1' for SPUBLISH; for a
-- semaphore's slot ARGV[6] the slot (from 0), which goes to the queue as
-- permit.lua's pass_slot says (the message names it; a slot at or past
-- the N in KEYS[7] is deleted instead).
-- The lock goes straight to the live head of the queue with a new token
-- (see hand_off); with nobody queued, nobody to wake. The uncontended
-- path runs MGET and DEL.
-- Returns 1 when released, 0 when the lock is gone or held by another.
--
-- This file opens its script, before the shared functions: Lua builds
-- every function of a script on every call, and the common cases (not the
-- holder's; nobody queued) return before they are built. A queued lock
-- goes on to hand_off, after them (release_fair_queued.lua).
local lw = redis.call('MGET', KEYS[1], KEYS[6])
local v, hn = lw[1], #ARGV[1]
if not v or string.byte(v, hn + 1) ~= 58 or string.sub(v, 1, hn) ~= ARGV[1] then -- 58 is ':'
  return 0
end
local n = lw[2] and redis.call('ZCARD', KEYS[4]) or 0 -- no waiting key: no queue
if n == 0 then
  redis.call('DEL', KEYS[1])
  return 1
end
