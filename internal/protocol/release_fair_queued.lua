-- The rest of release_fair.lua, after handoff.lua and permit.lua: the
-- holder let go of a lock (a slot) with a queue, which hand_off (pass_slot)
-- passes on.
if ARGV[6] then
  return pass_slot(tonumber(ARGV[6]), redis.call('GET', KEYS[7]), n, ARGV[2], ARGV[3], ARGV[4], ARGV[5]) or 1
end
return hand_off(ARGV[2], ARGV[3], ARGV[4], ARGV[5], n) or 1
