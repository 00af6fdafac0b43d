-- The rest of sem_release.lua, after permit.lua: the holder let go of a
-- slot with a queue, which pass_slot passes on.
return pass_slot(tonumber(ARGV[6]), lw[3], q, ARGV[2], ARGV[3], ARGV[4], ARGV[5]) or 1
