-- A fair waiter gives up: drop its ticket and, when ARGV[6] is '1' and the
-- lock was handed to it meanwhile, hand the lock on (a re-acquire under a
-- known holder id passes '0': the lock may be one it held before).
-- KEYS[1] lock, KEYS[2] counter, KEYS[3] ahead, KEYS[4] queue,
-- KEYS[5] tickets, KEYS[6] waiting.
-- ARGV[1] holder id, ARGV[2] channel, ARGV[3] counter ttl ms, ARGV[4] '1'
-- to lift the counter to the clock, ARGV[5] '1' for SPUBLISH, ARGV[6] pass on.
-- Returns 1 when it released the lock, else 0.
dequeue(ARGV[1])
if ARGV[6] ~= '1' then
  return 0
end
return let_go(ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5])
