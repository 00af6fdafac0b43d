-- Release a permit, one slot of a semaphore, if the holder still has it,
-- and hand the slot on.
-- KEYS[1] the slot's lock, KEYS[2] its counter, KEYS[3] its ahead,
-- KEYS[4] queue, KEYS[5] tickets, KEYS[6] waiting, KEYS[7] permits.
-- ARGV[1] holder id, ARGV[2] channel, ARGV[3] counter ttl ms, ARGV[4] '1'
-- to lift the counter to the clock, ARGV[5] '1' for SPUBLISH, ARGV[6] the
-- slot (from 0).
-- The slot goes straight to the live head of the queue with a new token of
-- its own counter, and the message names it ("holder:seq:attempt:slot");
-- a slot at or past the semaphore's N, as the last try wrote it, is
-- deleted instead (see permit.lua's pass_slot). The uncontended path runs
-- MGET and DEL.
-- Returns 1 when released, 0 when the slot is gone or held by another.
--
-- This file opens its script, before the shared functions: the common
-- cases (not the holder's; nobody queued) return before they are built.
local lw = redis.call('MGET', KEYS[1], KEYS[6], KEYS[7])
local v, hn = lw[1], #ARGV[1]
if not v or string.byte(v, hn + 1) ~= 58 or string.sub(v, 1, hn) ~= ARGV[1] then -- 58 is ':'
  return 0
end
local q = lw[2] and redis.call('ZCARD', KEYS[4]) or 0 -- no waiting key: no queue
if q == 0 then
  redis.call('DEL', KEYS[1])
  return 1
end
