-- The rest of sem_acquire.lua, after queue.lua, publish.lua, handoff.lua
-- and permit.lua: the holder has a slot (mine), every slot is held, or a
-- slot is free with a queue.
if mine then
  at_slot(mine)
  redis.call('PEXPIRE', LOCK, ARGV[2])
  dequeue(ARGV[1])
  return {2, tonumber(mine_seq), mine}
end
if not free then
  if ARGV[6] ~= '' then
    enqueue(ARGV[1], ARGV[2], ARGV[5], ARGV[6])
  end
  local soon = -1
  for i = 0, n - 1 do
    local p = redis.call('PTTL', slot_lock(i))
    if p >= 0 and (soon < 0 or p < soon) then
      soon = p
    end
  end
  return {0, soon, -1}
end
local head, _, _, now, more = live_head(q)
if more or (head and head ~= ARGV[1]) then
  if ARGV[6] ~= '' then
    enqueue(ARGV[1], ARGV[2], ARGV[5], ARGV[6])
  end
  if more then
    return {3, 1, -1}
  end
  -- The free slot is the live head's: it is handed over now, as a release
  -- would (acquire_fair.lua does the same), rather than left for the
  -- head's next try, which may never see it (a head that died keeps its
  -- place until its ticket expires; a head's N may not reach the slot).
  at_slot(free)
  hand_off(ARGV[8], ARGV[3], ARGV[4], ARGV[9], nil, ':' .. free)
  return {3, 0, -1}
end
if head then
  dequeue(ARGV[1])
end
at_slot(free)
local c, ahead = counter_of(free)
local r = take(ARGV[1], ARGV[2], ARGV[3], ARGV[4], c, now, ahead)
if r.err then
  return r
end
r[3] = free
-- The other free slots go to the next live waiters, each with its message
-- (at most N hand_offs, each bounded as live_head is).
for i = free + 1, n - 1 do
  if redis.call('EXISTS', KEYS[4]) == 0 then
    break
  end
  if not lv[i + 5] then
    at_slot(i)
    if hand_off(ARGV[8], ARGV[3], ARGV[4], ARGV[9], nil, ':' .. i) then
      break -- a counter past 2^53-1: the slot stays free
    end
  end
end
return r
