-- A semaphore's slots, after common.lua in the scripts that pick a slot.
-- A semaphore of N permits is N slots, each a lock with its own counter:
-- slot i (from 0) is KEYS[8+3i] lock, KEYS[9+3i] counter and KEYS[10+3i]
-- ahead. They share one fair queue (KEYS[4] queue, KEYS[5] tickets,
-- KEYS[6] waiting) and one channel; KEYS[7], permits, holds the N of the
-- last try, which a release reads (see permit.lua's pass_slot).

-- at_slot points LOCK, COUNTER and AHEAD (common.lua) at slot i, so that
-- the lock's functions work on it.
local function at_slot(i)
  LOCK, COUNTER, AHEAD = KEYS[8 + 3 * i], KEYS[9 + 3 * i], KEYS[10 + 3 * i]
end
