-- The rest of acquire_fair.lua, after queue.lua, publish.lua and
-- handoff.lua: the lock is held (seq: by this holder; taken: by another),
-- or it is free with a queue.
if seq then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  dequeue(ARGV[1])
  return {2, tonumber(seq)}
end
if taken then
  if ARGV[6] ~= '' then
    enqueue(ARGV[1], ARGV[2], ARGV[5], ARGV[6])
  end
  return {0, redis.call('PTTL', KEYS[1])}
end
local head, _, _, now, more = live_head(n)
if more or (head and head ~= ARGV[1]) then
  if ARGV[6] ~= '' then
    enqueue(ARGV[1], ARGV[2], ARGV[5], ARGV[6])
  end
  if more then
    return {3, 1}
  end
  hand_off(ARGV[7], ARGV[3], ARGV[4], ARGV[8], nil) -- to the live head
  return {3, 0}
end
if head then
  dequeue(ARGV[1])
end
return take(ARGV[1], ARGV[2], ARGV[3], ARGV[4], lc[2], now)
