-- A semaphore's slots, after common.lua in the scripts that pick or let go
-- of a slot (in release_fair.lua, whose KEYS[7] is missing for a lock).
-- A semaphore of N permits is N slots, each a lock with its own counter,
-- sharing one fair queue (KEYS[4] queue, KEYS[5] tickets, KEYS[6]
-- waiting) and one channel; KEYS[7], permits (PREFIX{NAME}#permits), holds
-- the N of the last try, which a release reads (see permit.lua's
-- pass_slot). Slot i (from 0) is the lock PREFIX{NAME}#i, with its counter
-- and ahead key after it (:fence, :ahead).
--
-- The slots' keys are made here from the permits key's name instead of
-- being passed in KEYS: a call then names 7 keys whatever N is (each key
-- passed costs the client allocations and the call bytes). They share the
-- name's hash tag, so a Redis Cluster routes the call to their slot, where
-- a script may use them.
local SLOTS = KEYS[7] and string.sub(KEYS[7], 1, -8) -- PREFIX{NAME}#: the key less 'permits'
local MAX_PERMITS = 64 -- protocol.MaxPermits

-- permits_n is the N in the permits key's value v (GET or MGET: false when
-- missing): an integer 1..MAX_PERMITS; nil for anything else, which only
-- another client than these scripts writes (then as if missing).
local function permits_n(v)
  local n = v and tonumber(v)
  if n and n >= 1 and n <= MAX_PERMITS and n == math.floor(n) then
    return n
  end
  return nil
end

-- own_slot looks for holder's slot among slots from..to-1 (to at most
-- MAX_PERMITS): one MGET. Returns the slot and the Seq, or nil. A holder's
-- slot may be past its own N when clients of one name use different N: a
-- larger N's release handed it over, or the holder's earlier try with a
-- larger N took it.
local function own_slot(holder, from, to)
  to = math.min(to, MAX_PERMITS)
  if to <= from then
    return nil
  end
  local ks = {}
  for i = from, to - 1 do
    ks[#ks + 1] = SLOTS .. i
  end
  local vs = redis.call('MGET', unpack(ks))
  for i = from, to - 1 do
    local seq = holds(vs[i - from + 1], holder)
    if seq then
      return i, seq
    end
  end
  return nil
end

-- slot_lock is slot i's lock key.
local function slot_lock(i)
  return SLOTS .. i
end

-- at_slot points LOCK, COUNTER and AHEAD (common.lua) at slot i, so that
-- the lock's functions work on it.
local function at_slot(i)
  LOCK = SLOTS .. i
  COUNTER, AHEAD = LOCK .. ':fence', LOCK .. ':ahead'
end
