-- A semaphore's waiter gives up: drop its ticket and, when ARGV[6] is '1'
-- and a slot was handed to it meanwhile (or a try whose reply was lost
-- took one), let that slot go as a release does (permit.lua's pass_slot).
-- KEYS[1] to KEYS[7] as for sem_acquire.lua.
-- ARGV[1] holder id, ARGV[2] channel, ARGV[3] counter ttl ms, ARGV[4] '1'
-- to lift the counter to the clock, ARGV[5] '1' for SPUBLISH, ARGV[6] pass
-- on, ARGV[7] N.
-- Returns 1 when it released a slot, else 0.
dequeue(ARGV[1])
if ARGV[6] ~= '1' then
  return 0
end
-- The holder's slot may be past its N: see own_slot.
local p = redis.call('GET', KEYS[7])
local i = own_slot(ARGV[1], 0, math.max(tonumber(ARGV[7]), permits_n(p) or 0))
if not i then
  return 0
end
at_slot(i)
return pass_slot(i, p, nil, ARGV[2], ARGV[3], ARGV[4], ARGV[5]) or 1
