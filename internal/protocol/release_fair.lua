-- Release a fair lock if the holder still has it, and hand it on.
-- KEYS[1] lock, KEYS[2] counter, KEYS[3] queue, KEYS[4] tickets.
-- ARGV[1] holder id, ARGV[2] channel, ARGV[3] counter ttl ms, ARGV[4] '1'
-- to lift the counter to the clock, ARGV[5] '1' for SPUBLISH.
-- The lock goes straight to the live head of the queue with a new token
-- (see hand_off); with nobody queued, nobody to wake.
-- Returns 1 when released, 0 when the lock is gone or held by another.
return let_go(ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5])
