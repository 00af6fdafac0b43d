-- The fair queue's functions, prepended after common.lua to the scripts of
-- the fair lock (KEYS[3] queue, KEYS[4] tickets).

-- Tickets are "expiry_ms:ttl_ms:attempt": the waiter's place lasts until
-- expiry_ms (server clock), the lock is handed to it with ttl_ms, and the
-- handoff message names attempt, the try that wrote the ticket, so that
-- the waiter counts its lease from when it sent that try. ttl_ms is the
-- claim window, min(the waiter's ttl, the ticket's): a handed lock lasts
-- no longer than the ticket would unless its new holder, alive, refreshes
-- it, so a waiter that died holds it for that long, not for its ttl. The
-- waiter's own script writes it, so a client that counts the whole ttl
-- (before this rule) is still handed the whole ttl.

-- live_head returns the first waiter whose ticket has not expired, with
-- its ttl and attempt, dropping expired tickets on the way; nil when none.
-- Its fourth value is the clock (clock_us) when it read it, for the caller
-- to reuse. queued is true when the caller saw the queue exist.
local function live_head(queued)
  if not queued and redis.call('EXISTS', KEYS[3]) == 0 then -- the common case, and much cheaper than ZRANGE
    return nil
  end
  local h = redis.call('ZRANGE', KEYS[3], 0, 0)[1]
  local now = clock_us()
  local now_ms = math.floor(now / 1000)
  while h do
    local t = redis.call('HGET', KEYS[4], h)
    if t then
      local a = string.find(t, ':', 1, true)
      local b = a and string.find(t, ':', a + 1, true)
      -- a ticket that is not "expiry:ttl:attempt" with a ttl of at least
      -- 1ms is dropped like an expired one
      local exp = b and tonumber(string.sub(t, 1, a - 1))
      local ttl = b and tonumber(string.sub(t, a + 1, b - 1))
      if exp and ttl and exp > now_ms and ttl >= 1 and ttl == math.floor(ttl) then
        return h, string.sub(t, a + 1, b - 1), string.sub(t, b + 1), now
      end
    end
    redis.call('ZREM', KEYS[3], h)
    redis.call('HDEL', KEYS[4], h)
    h = redis.call('ZRANGE', KEYS[3], 0, 0)[1]
  end
  return nil, nil, nil, now
end

-- enqueue puts holder in the queue (keeping its place if it is there) and
-- writes its ticket, with the claim window; both keys expire with the
-- last ticket.
local function enqueue(holder, ttl, ticket_ms, attempt)
  local us = clock_us()
  local claim = ttl
  if tonumber(ttl) > tonumber(ticket_ms) then
    claim = ticket_ms
  end
  redis.call('ZADD', KEYS[3], 'NX', us, holder)
  redis.call('HSET', KEYS[4], holder, fmt(math.floor(us / 1000) + tonumber(ticket_ms)) .. ':' .. claim .. ':' .. attempt)
  redis.call('PEXPIRE', KEYS[3], ticket_ms)
  redis.call('PEXPIRE', KEYS[4], ticket_ms)
end

local function dequeue(holder)
  if redis.call('ZREM', KEYS[3], holder) == 1 then
    redis.call('HDEL', KEYS[4], holder)
  end
end
