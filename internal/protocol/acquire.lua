-- Acquire a lease: one round trip, atomic.
-- KEYS[1] lock, KEYS[2] counter, KEYS[3] queue, KEYS[4] tickets.
-- ARGV[1] holder id, ARGV[2] ttl in ms,
-- ARGV[3] "1" to lift the counter to Redis TIME in microseconds first (clock floor),
-- ARGV[4] counter ttl in ms ("0": the counter never expires),
-- ARGV[5] "1" when the holder may already hold the lock (re-acquire after a restart),
-- ARGV[6] "1" for an unfenced lock: no counter is read or written and seq is 0
--         (redlock without quorum fencing, an efficiency lock),
-- ARGV[7] "1" for a fair lock: waiters queue, and a free lock goes to the head
--         of the queue, not to whoever asks first,
-- ARGV[8] ticket ttl in ms (fair), ARGV[9] "1" to queue when not acquired (fair).
-- The lock's value is "holder:seq", so a re-acquire can return the same token.
-- Returns {1, seq} when acquired, {2, seq} when this holder had it already
-- (re-acquired, or handed to it by a release; its ttl is reset), {0, pttl}
-- when another holder has it, {0, -3} when it is free but reserved for the
-- waiters queued ahead.
local v = redis.call('GET', KEYS[1])
local prefix = ARGV[1] .. ':'
if v then
  if (ARGV[5] == '1' or ARGV[7] == '1') and string.sub(v, 1, #prefix) == prefix then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    if ARGV[7] == '1' then
      dequeue(ARGV[1])
    end
    return {2, tonumber(string.sub(v, #prefix + 1))}
  end
  if ARGV[7] == '1' and ARGV[9] == '1' then
    enqueue(ARGV[1], ARGV[2], ARGV[8])
  end
  return {0, redis.call('PTTL', KEYS[1])}
end
if ARGV[7] == '1' then
  local head = live_head()
  if head and head ~= ARGV[1] then
    if ARGV[9] == '1' then
      enqueue(ARGV[1], ARGV[2], ARGV[8])
    end
    return {0, -3}
  end
  if head then
    dequeue(ARGV[1])
  end
end
if ARGV[6] == '1' then
  redis.call('SET', KEYS[1], ARGV[1] .. ':0', 'PX', ARGV[2])
  return {1, 0}
end
local seq = next_seq(ARGV[3], ARGV[4])
if not seq then
  return redis.error_reply('fencelock: counter past 2^53-1')
end
redis.call('SET', KEYS[1], prefix .. string.format('%d', seq), 'PX', ARGV[2])
return {1, seq}
