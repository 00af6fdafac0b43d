-- Shared functions, prepended to the acquire and release scripts.
-- KEYS[1] lock, KEYS[2] counter, KEYS[3] queue (a sorted set of holder ids
-- by arrival), KEYS[4] tickets (a hash: holder id -> "expiry_ms:ttl_ms").

-- now_ms is the server's clock in milliseconds; now_us in microseconds.
local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- next_seq is the next token Seq, which the counter takes: one more than
-- the counter, or the server's clock in microseconds when that is more and
-- either clock_floor is '1' or the counter is missing and may expire
-- (counter_ttl is not '0'). So a counter that expired, or was lost, starts
-- again above every token it issued, as long as the clock did not step
-- back. Returns nil past 2^53-1.
local function next_seq(clock_floor, counter_ttl)
  local c = redis.call('GET', KEYS[2])
  local seq = tonumber(c or '0') + 1
  if clock_floor == '1' or (not c and counter_ttl ~= '0') then
    seq = math.max(seq, now_us())
  end
  if seq > 9007199254740991 then
    return nil
  end
  if counter_ttl ~= '0' then
    redis.call('SET', KEYS[2], string.format('%d', seq), 'PX', counter_ttl)
  else
    redis.call('SET', KEYS[2], string.format('%d', seq))
  end
  return seq
end

-- live_head returns the first waiter whose ticket has not expired and the
-- ttl it asked for, dropping expired tickets on the way; nil when none.
local function live_head()
  if redis.call('EXISTS', KEYS[3]) == 0 then -- the common case, and cheaper than ZRANGE
    return nil
  end
  local now
  while true do
    local h = redis.call('ZRANGE', KEYS[3], 0, 0)[1]
    if not h then
      return nil
    end
    now = now or math.floor(now_us() / 1000)
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
  if redis.call('ZREM', KEYS[3], holder) == 1 then
    redis.call('HDEL', KEYS[4], holder)
  end
end

-- publish sends msg on a lock's channel: with SPUBLISH when sharded is '1'
-- (a Redis Cluster client: the channel shares the lock's hash slot, so it
-- is the script's own shard), else with PUBLISH. A server without sharded
-- pub/sub refuses SPUBLISH, and then gets PUBLISH: its waiters use classic
-- SUBSCRIBE too (see package notify).
local function publish(channel, msg, sharded)
  if sharded == '1' then
    local r = redis.pcall('SPUBLISH', channel, msg)
    if type(r) ~= 'table' or not r.err then
      return
    end
  end
  redis.call('PUBLISH', channel, msg)
end

-- Lua's own number-to-string conversion keeps 14 digits: clock-floor
-- tokens (about 1.8e15) must be formatted with string.format('%d', seq)
-- wherever a script writes them into a string.
