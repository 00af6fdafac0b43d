-- Shared functions, prepended to the acquire and release scripts.
-- KEYS[1] lock, KEYS[2] counter, KEYS[3] queue (a sorted set of holder ids
-- by arrival), KEYS[4] tickets (a hash: holder id -> "expiry_ms:ttl_ms").

-- now_ms is the server's clock in milliseconds; now_us in microseconds.
local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- next_seq is the next token Seq: the counter lifted to the clock floor
-- (when clock_floor is '1'), incremented, its ttl set (unless counter_ttl
-- is '0'). Returns nil past 2^53-1.
local function next_seq(clock_floor, counter_ttl)
  if clock_floor == '1' then
    local floor = now_us()
    local c = tonumber(redis.call('GET', KEYS[2]) or '0')
    if c < floor then
      redis.call('SET', KEYS[2], floor)
    end
  end
  local seq = redis.call('INCR', KEYS[2])
  if seq > 9007199254740991 then
    return nil
  end
  if counter_ttl ~= '0' then
    redis.call('PEXPIRE', KEYS[2], counter_ttl)
  end
  return seq
end

-- live_head returns the first waiter whose ticket has not expired and the
-- ttl it asked for, dropping expired tickets on the way; nil when none.
local function live_head()
  local now = math.floor(now_us() / 1000)
  while true do
    local h = redis.call('ZRANGE', KEYS[3], 0, 0)[1]
    if not h then
      return nil
    end
    local t = redis.call('HGET', KEYS[4], h)
    if t then
      local sep = string.find(t, ':', 1, true)
      if tonumber(string.sub(t, 1, sep - 1)) > now then
        return h, string.sub(t, sep + 1)
      end
    end
    redis.call('ZREM', KEYS[3], h)
    redis.call('HDEL', KEYS[4], h)
  end
end

-- enqueue puts holder in the queue (keeping its place if it is there) and
-- sets its ticket to expire ticket_ms from now; both keys expire with the
-- last ticket.
local function enqueue(holder, ttl, ticket_ms)
  local us = now_us()
  if not redis.call('ZSCORE', KEYS[3], holder) then
    redis.call('ZADD', KEYS[3], us, holder)
  end
  redis.call('HSET', KEYS[4], holder, (math.floor(us / 1000) + tonumber(ticket_ms)) .. ':' .. ttl)
  redis.call('PEXPIRE', KEYS[3], ticket_ms)
  redis.call('PEXPIRE', KEYS[4], ticket_ms)
end

local function dequeue(holder)
  redis.call('ZREM', KEYS[3], holder)
  redis.call('HDEL', KEYS[4], holder)
end

