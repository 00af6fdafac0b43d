-- Try to take a permit of a semaphore of N: one of its N slots, each a
-- lock with its own counter (see slot.lua). A free slot goes to the live
-- head of the semaphore's fair queue.
-- KEYS[1], KEYS[2], KEYS[3] slot 0's lock, counter and ahead (the script
-- works on the slot it picks: see slot.lua), KEYS[4] queue, KEYS[5]
-- tickets, KEYS[6] waiting, KEYS[7] permits.
-- ARGV[1] holder id, ARGV[2] ttl ms, ARGV[3] counter ttl ms ('0':
-- forever), ARGV[4] '1' to lift the counter to the clock first, ARGV[5]
-- ticket ttl ms, ARGV[6] this try's attempt id, '' to try without
-- queueing, ARGV[7] N, ARGV[8] channel, ARGV[9] '1' for SPUBLISH.
-- Replies (see PermitResult): {1, seq, i} slot i acquired; {2, seq, i} the
-- holder had slot i already, or it was handed to it (its ttl is reset,
-- its ticket dropped); {0, pttl, -1} every slot is held, the first to
-- expire in pttl ms (-1: none has a ttl); {3, 0, -1} a slot is free but
-- reserved for the waiters queued ahead (and was handed to the live head
-- of the queue); {3, 1, -1} a slot is free and
-- the queue's head is not known yet (expired tickets are dropped a few
-- per call): try again in 1ms. Unless ARGV[6] is '', a try that does not
-- get a permit queues the holder and writes its ticket with ARGV[6] (a
-- full queue: no ticket). A try writes N into the permits key when it
-- differs or is missing, with the counter's ttl (none with ARGV[3] '0'):
-- the key lapses a counter ttl after the last change, and a release that
-- finds it missing frees its slot and wakes the waiters, whose tries write
-- it again (permit.lua). A holder's slot past N, from a client with a
-- larger N (the permits key's, when larger), is found too. When a waiter
-- takes a slot and more are free, each goes on to the next live waiter, as
-- a release would hand it on.
--
-- This file opens its script, after common.lua and slot.lua: the common
-- case (slot 0 free, nobody waiting: MGET, SET, SET, as a lock's; a later
-- free slot: one MGET more, for its counter) returns before
-- the queue's functions are built; every other case goes on in
-- sem_acquire_queued.lua.
local n = tonumber(ARGV[7])
-- One MGET: the waiting and permits keys, slot 0's counter and ahead key
-- (KEYS[2], KEYS[3]: the slot an uncontended try takes), then every slot,
-- slot i at lv[i + 5].
local ks = {KEYS[6], KEYS[7], KEYS[2], KEYS[3]}
for i = 0, n - 1 do
  ks[i + 5] = slot_lock(i)
end
local lv = redis.call('MGET', unpack(ks))

-- counter_of returns the counter and ahead key of slot i, which at_slot
-- points at: slot 0's as read above, another's read now.
local function counter_of(i)
  if i == 0 then
    return lv[3], lv[4]
  end
  local ca = redis.call('MGET', COUNTER, AHEAD)
  return ca[1], ca[2]
end
if lv[2] ~= ARGV[7] then
  if ARGV[3] == '0' then
    redis.call('SET', KEYS[7], ARGV[7])
  else
    redis.call('SET', KEYS[7], ARGV[7], 'PX', ARGV[3])
  end
end
local mine, mine_seq, free -- the holder's slot and its Seq; the first free slot
for i = 0, n - 1 do
  local seq, taken = holds(lv[i + 5], ARGV[1])
  if seq then
    mine, mine_seq = i, seq
    break
  end
  if not taken and not free then
    free = i
  end
end
local p = permits_n(lv[2]) -- the N of the last try, when the key holds one
if not mine and p and p > n then
  mine, mine_seq = own_slot(ARGV[1], n, p)
end
local q -- the queue's length, when a slot is free
if not mine and free then
  q = lv[1] and redis.call('ZCARD', KEYS[4]) or 0 -- no waiting key: no queue
  if q == 0 then
    at_slot(free)
    local c, ahead = counter_of(free)
    local r = take(ARGV[1], ARGV[2], ARGV[3], ARGV[4], c, nil, ahead)
    if r.err then
      return r
    end
    r[3] = free
    return r
  end
end
