-- The fair queue's functions, prepended after common.lua to the scripts of
-- the fair lock (KEYS[4] queue, KEYS[5] tickets).

-- Tickets are "expiry_ms:ttl_ms:attempt": the waiter's place lasts until
-- expiry_ms (server clock), the lock is handed to it with ttl_ms, and the
-- handoff message names attempt, the try that wrote the ticket, so that
-- the waiter counts its lease from when it sent that try. ttl_ms is the
-- claim window, min(the waiter's ttl, the ticket's): a handed lock lasts
-- no longer than the ticket would unless its new holder, alive, refreshes
-- it, so a waiter that died holds it for that long, not for its ttl. The
-- waiter's own script writes it, so a client that counts the whole ttl
-- (before this rule) is still handed the whole ttl.
--
-- Bounded work (see protocol.MaxQueue and protocol.MaxDrop): a call drops
-- at most MAX_DROP expired tickets, and the queue holds at most MAX_QUEUE
-- waiters: a waiter that finds it full waits without a ticket. A longer
-- queue was written by someone else than these scripts; it is dropped
-- whole, with UNLINK, which frees it off the server's main thread.
local MAX_QUEUE = 1000
local MAX_DROP = 100

-- ticket_live returns a ticket's ttl and attempt (as text) when it is
-- live at now_ms, else nil. A ticket that is not "expiry:ttl:attempt" with
-- a ttl of at least 1ms is dropped like an expired one.
local function ticket_live(t, now_ms)
  if not t then
    return nil
  end
  local a = string.find(t, ':', 1, true)
  local b = a and string.find(t, ':', a + 1, true)
  local exp = b and tonumber(string.sub(t, 1, a - 1))
  local ttl = b and tonumber(string.sub(t, a + 1, b - 1))
  if exp and ttl and exp > now_ms and ttl >= 1 and ttl == math.floor(ttl) then
    return string.sub(t, a + 1, b - 1), string.sub(t, b + 1)
  end
  return nil
end

-- drop removes the waiters ids[1..n] from the queue and their tickets.
local function drop(ids, n)
  if n > 0 then
    redis.call('ZREM', KEYS[4], unpack(ids, 1, n))
    redis.call('HDEL', KEYS[5], unpack(ids, 1, n))
  end
end

-- live_head returns the first waiter whose ticket has not expired, with
-- its ttl and attempt; nil when none was found. It drops the expired
-- tickets ahead of it, at most MAX_DROP: its fifth value is true when it
-- dropped that many and the queue goes on, so the head is not known yet
-- (the next call drops more). Its fourth value is the clock (clock_us)
-- when it read it, for the caller to reuse. n is the queue's length
-- (ZCARD) when the caller read it, or nil.
local function live_head(n)
  n = n or redis.call('ZCARD', KEYS[4])
  if n == 0 then -- the common case
    return nil
  end
  if n > MAX_QUEUE then
    redis.call('UNLINK', KEYS[4], KEYS[5])
    return nil
  end
  local now = clock_us()
  local now_ms = math.floor(now / 1000)
  local h = redis.call('ZRANGE', KEYS[4], 0, 0)[1]
  local ttl, attempt = ticket_live(redis.call('HGET', KEYS[5], h), now_ms)
  if ttl then
    return h, ttl, attempt, now
  end
  -- The head is dead: look at the next few at once.
  local ids = redis.call('ZRANGE', KEYS[4], 0, MAX_DROP)
  local ts = redis.call('HMGET', KEYS[5], unpack(ids))
  for i = 1, #ids do
    ttl, attempt = ticket_live(ts[i], now_ms)
    if ttl then
      drop(ids, i - 1)
      return ids[i], ttl, attempt, now
    end
  end
  local dropped = math.min(#ids, MAX_DROP)
  drop(ids, dropped)
  return nil, nil, nil, now, #ids > dropped
end

-- enqueue puts holder in the queue (keeping its place if it is there) and
-- writes its ticket, with the claim window; both keys, and the waiting
-- key (KEYS[6]) that tells the queue may hold someone, expire with the
-- last ticket. A full queue first drops expired tickets at its head (as
-- live_head does); a holder still without room gets no ticket, and
-- enqueue returns false.
local function enqueue(holder, ttl, ticket_ms, attempt)
  local n = redis.call('ZCARD', KEYS[4])
  if n == 0 then
    redis.call('UNLINK', KEYS[5]) -- tickets left without a queue are no one's
  elseif n >= MAX_QUEUE and not redis.call('ZSCORE', KEYS[4], holder) then
    live_head(n)
    if redis.call('ZCARD', KEYS[4]) >= MAX_QUEUE then
      return false
    end
  end
  local us = clock_us()
  local claim = ttl
  if tonumber(ttl) > tonumber(ticket_ms) then
    claim = ticket_ms
  end
  redis.call('ZADD', KEYS[4], 'NX', us, holder)
  redis.call('HSET', KEYS[5], holder, fmt(math.floor(us / 1000) + tonumber(ticket_ms)) .. ':' .. claim .. ':' .. attempt)
  redis.call('PEXPIRE', KEYS[4], ticket_ms)
  redis.call('PEXPIRE', KEYS[5], ticket_ms)
  -- Last, so it outlives both: while it is missing nobody queues, and the
  -- uncontended try and release skip the queue.
  redis.call('SET', KEYS[6], '1', 'PX', ticket_ms)
  return true
end

local function dequeue(holder)
  if redis.call('ZREM', KEYS[4], holder) == 1 then
    redis.call('HDEL', KEYS[5], holder)
  end
end
