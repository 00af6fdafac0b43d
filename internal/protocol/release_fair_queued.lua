-- The rest of release_fair.lua, after handoff.lua: the holder let go of a
-- lock with a queue, which hand_off passes on.
return hand_off(ARGV[2], ARGV[3], ARGV[4], ARGV[5], n) or 1
