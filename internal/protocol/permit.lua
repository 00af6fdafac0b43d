-- A semaphore's release, after common.lua, slot.lua, publish.lua,
-- queue.lua and handoff.lua in the scripts that let go of a slot.

-- pass_slot lets go of slot i (LOCK), which the caller holds. Below N, the
-- permits key's value p, it goes to the live head of the queue with a new
-- token of its own counter (hand_off), and the message names it
-- ("holder:seq:attempt:i"). At or past N it is deleted and handed to
-- nobody: the semaphore shrank, and the waiters take only the first N
-- slots. With p missing or no N (permits_n) it is deleted and the waiters
-- are woken: their tries take it in order, and write N again. q is as for
-- live_head. Returns hand_off's error reply, or nil.
local function pass_slot(i, p, q, channel, counter_ttl, clock_floor, sharded)
  local n = permits_n(p)
  if n and i < n then
    return hand_off(channel, counter_ttl, clock_floor, sharded, q, ':' .. i)
  end
  redis.call('DEL', LOCK)
  if not n then
    publish(channel, '', sharded)
  end
  return nil
end
