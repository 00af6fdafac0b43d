-- The fair release, after common.lua, publish.lua and queue.lua in the
-- scripts that let go of a fair lock.

-- hand_off lets go of the lock, which the caller holds: it gives it to the
-- live head of the queue with a new token (overwriting the caller's value)
-- for its ticket's ttl, the claim window (see queue.lua), and tells it so,
-- "holder:seq:attempt", or deletes it when nobody waits. When live_head
-- dropped expired tickets without finding the head, it deletes the lock
-- and publishes a plain wake-up: the waiters' tries drop the rest.
-- Past 2^53-1 it returns an error reply and changes nothing but the
-- expired tickets it dropped; else nil. n is as for live_head. tail, when
-- given, ends the message: a semaphore's ":slot" (permit.lua).
local function hand_off(channel, counter_ttl, clock_floor, sharded, n, tail)
  local head, ttl, attempt, now, more = live_head(n)
  if not head then
    redis.call('DEL', LOCK)
    if more then
      publish(channel, '', sharded)
    end
    return nil
  end
  local seq, s = next_seq(counter_ttl, clock_floor, nil, now)
  if not seq then
    return redis.error_reply('fencelock: counter past 2^53-1')
  end
  local v = head .. ':' .. s
  redis.call('SET', LOCK, v, 'PX', ttl)
  dequeue(head)
  publish(channel, v .. ':' .. attempt .. (tail or ''), sharded)
  return nil
end

-- let_go releases a fair lock if holder has it, handing it on (hand_off).
-- Returns 1 when released, 0 when the lock is gone or held by another, or
-- an error reply.
local function let_go(holder, channel, counter_ttl, clock_floor, sharded)
  if not holds(redis.call('GET', LOCK), holder) then
    return 0
  end
  local err = hand_off(channel, counter_ttl, clock_floor, sharded)
  if err then
    return err
  end
  return 1
end
