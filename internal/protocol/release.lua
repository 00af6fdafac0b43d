-- Release a lease if the holder still has it, and pass the lock on.
-- KEYS[1] lock, KEYS[2] counter, KEYS[3] queue, KEYS[4] tickets.
-- ARGV[1] holder id, ARGV[2] wake-up channel, ARGV[3] "1" for a fair lock,
-- ARGV[4] clock floor "1", ARGV[5] counter ttl in ms (as for acquire),
-- ARGV[6] "1" when a waiter gives up: its ticket is dropped too; "2" when a
-- waiter that may hold the lock already (a re-acquire under its holder id)
-- gives up: its ticket is dropped and nothing else. ARGV[7] "1" to publish
-- with SPUBLISH (a cluster client, see publish in common.lua).
-- A fair lock goes straight to the live head of the queue, with a new token,
-- and the message on the channel is "holder:seq" for that waiter alone (no
-- message when nobody is queued); an unfair release publishes "", which
-- wakes one waiter per subscribed client.
-- Returns 1 when released, 0 when the lock is gone or held by another.
if ARGV[6] == '1' or ARGV[6] == '2' then
  dequeue(ARGV[1])
  if ARGV[6] == '2' then
    return 0
  end
end
local v = redis.call('GET', KEYS[1])
local prefix = ARGV[1] .. ':'
if not v or string.sub(v, 1, #prefix) ~= prefix then
  return 0
end
redis.call('DEL', KEYS[1])
if ARGV[3] == '1' then
  local head, ttl = live_head()
  if head then
    local seq = next_seq(ARGV[4], ARGV[5])
    if not seq then
      return redis.error_reply('fencelock: counter past 2^53-1')
    end
    redis.call('SET', KEYS[1], head .. ':' .. string.format('%d', seq), 'PX', ttl)
    dequeue(head)
    publish(ARGV[2], head .. ':' .. string.format('%d', seq), ARGV[7])
  end
  -- Every fair waiter is queued: with nobody queued, nobody to wake.
  return 1
end
publish(ARGV[2], '', ARGV[7])
return 1
