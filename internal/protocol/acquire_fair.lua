-- Try to take a fair lock: a free lock goes to the live head of the queue.
-- KEYS[1] lock, KEYS[2] counter, KEYS[3] queue, KEYS[4] tickets.
-- ARGV[1] holder id, ARGV[2] ttl ms, ARGV[3] counter ttl ms ('0': forever),
-- ARGV[4] '1' to lift the counter to the clock first, ARGV[5] ticket ttl
-- ms, ARGV[6] this try's attempt id, '' to try without queueing.
-- Replies (see TryResult): {1, seq} acquired; {2, seq} the holder had it
-- already, or it was handed to it (its ttl is reset, its ticket dropped);
-- {0, pttl} another holder has it; {3, 0} it is free but reserved for the
-- waiters queued ahead. Unless ARGV[6] is '', a try that does not get the
-- lock queues the holder and writes its ticket with ARGV[6].

-- enqueue puts holder in the queue (keeping its place if it is there) and
-- writes its ticket; both keys expire with the last ticket.
local function enqueue(holder, ttl, ticket_ms, attempt)
  local us = clock_us()
  redis.call('ZADD', KEYS[3], 'NX', us, holder)
  redis.call('HSET', KEYS[4], holder, fmt(math.floor(us / 1000) + tonumber(ticket_ms)) .. ':' .. ttl .. ':' .. attempt)
  redis.call('PEXPIRE', KEYS[3], ticket_ms)
  redis.call('PEXPIRE', KEYS[4], ticket_ms)
end

-- One MGET reads the lock and its counter: the uncontended path runs
-- MGET, EXISTS (the queue), TIME, SET and SET.
local lc = redis.call('MGET', KEYS[1], KEYS[2])
local seq, taken = holds(lc[1], ARGV[1])
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
local head, _, _, now = live_head()
if head and head ~= ARGV[1] then
  if ARGV[6] ~= '' then
    enqueue(ARGV[1], ARGV[2], ARGV[5], ARGV[6])
  end
  return {3, 0}
end
if head then
  dequeue(ARGV[1])
end
local n, s = next_seq(ARGV[3], ARGV[4], lc[2], now)
if not n then
  return redis.error_reply('fencelock: counter past 2^53-1')
end
redis.call('SET', KEYS[1], ARGV[1] .. ':' .. s, 'PX', ARGV[2])
return {1, n}
