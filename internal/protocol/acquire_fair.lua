-- Try to take a fair lock: a free lock goes to the live head of the queue.
-- KEYS[1] lock, KEYS[2] counter, KEYS[3] ahead, KEYS[4] queue,
-- KEYS[5] tickets, KEYS[6] waiting.
-- ARGV[1] holder id, ARGV[2] ttl ms, ARGV[3] counter ttl ms ('0': forever),
-- ARGV[4] '1' to lift the counter to the clock first, ARGV[5] ticket ttl
-- ms, ARGV[6] this try's attempt id, '' to try without queueing, ARGV[7]
-- channel, ARGV[8] '1' for SPUBLISH.
-- Replies (see TryResult): {1, seq} acquired; {2, seq} the holder had it
-- already, or it was handed to it (its ttl is reset, its ticket dropped);
-- {0, pttl} another holder has it; {3, 0} it is free but reserved for the
-- waiters queued ahead, and was handed to the live head of the queue (as
-- a release would: a head that died costs the claim window, not its
-- ticket's life); {3, 1} it is free and the queue's head is not
-- known yet (expired tickets are dropped a few per call): try again in
-- 1ms. Unless ARGV[6] is '', a try that does not get the lock queues the
-- holder and writes its ticket with ARGV[6] (a full queue: no ticket).
--
-- This file opens its script, right after common.lua: Lua builds every
-- function of a script on every call, and the common case (a free lock,
-- nobody waiting: MGET, SET, SET) returns before the queue's
-- functions are built. Every other case goes on in acquire_fair_queued.lua,
-- after queue.lua, publish.lua and handoff.lua.
local lc = redis.call('MGET', KEYS[1], KEYS[2], KEYS[3], KEYS[6])
local seq, taken = holds(lc[1], ARGV[1])
local n -- the queue's length, when the lock is free
if not seq and not taken then
  n = lc[4] and redis.call('ZCARD', KEYS[4]) or 0 -- no waiting key: no queue
  if n == 0 then
    return take(ARGV[1], ARGV[2], ARGV[3], ARGV[4], lc[2], nil, lc[3])
  end
end
