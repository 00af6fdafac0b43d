-- Shared functions, prepended to the scripts that take, pass on or lift a
-- lock's counter. Every such script has KEYS[1] lock, KEYS[2] counter, and
-- for the fair lock KEYS[3] queue (a sorted set of holder ids by arrival)
-- and KEYS[4] tickets (a hash: holder id -> ticket, see ticket.go).
-- The formats of the lock's value, the ticket and the release message are
-- documented, parsed and tested in Go (package protocol); this file is
-- their only writer.

local MAX_SEQ = 9007199254740991 -- 2^53-1: Lua numbers are doubles

-- clock_us is the server's clock in microseconds.
local function clock_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- fmt writes an integer without Lua's 14-digit rounding (tokens near the
-- clock are about 1.8e15).
local function fmt(n)
  return string.format('%d', n)
end

-- store_counter writes v as the counter under the counter rule (see
-- counter.go): ttl_ms '0' keeps it forever; otherwise it expires after
-- ttl_ms, or later when v is above the clock, so that by the time it is
-- missing the clock has passed every value it held, and a missing counter
-- restarting at the clock never goes back.
local function store_counter(v, ttl_ms, now)
  if ttl_ms == '0' then
    redis.call('SET', KEYS[2], fmt(v))
    return
  end
  local px = tonumber(ttl_ms)
  if v > now then
    -- 2ms of margin: Redis 7.2 counts PX from the script's start, a
    -- moment before TIME was read
    px = math.max(px, math.ceil((v - now) / 1000) + 2)
  end
  redis.call('SET', KEYS[2], fmt(v), 'PX', px)
end

-- counter_now is the counter's value, or the clock when it is missing: a
-- missing counter stands where a new one would start.
local function counter_now(now)
  local c = redis.call('GET', KEYS[2])
  if c then
    return tonumber(c), true
  end
  return now, false
end

-- next_seq is the next token Seq, which the counter takes: one more than
-- the counter (the clock when it is missing), lifted to the clock first
-- when clock_floor is '1'. Returns nil past 2^53-1.
local function next_seq(counter_ttl, clock_floor)
  local now = clock_us()
  local seq = counter_now(now) + 1
  if clock_floor == '1' then
    seq = math.max(seq, now)
  end
  if seq > MAX_SEQ then
    return nil
  end
  store_counter(seq, counter_ttl, now)
  return seq
end

-- held_by returns the Seq in the lock's value when holder has the lock,
-- else nil; and whether anyone has it. The value is "holder:seq"; holder
-- ids have no ':'.
local function held_by(holder)
  local v = redis.call('GET', KEYS[1])
  if not v then
    return nil, false
  end
  local prefix = holder .. ':'
  if string.sub(v, 1, #prefix) == prefix then
    return string.sub(v, #prefix + 1), true
  end
  return nil, true
end

-- Tickets are "expiry_ms:ttl_ms:attempt": the waiter's place lasts until
-- expiry_ms (server clock), the lock is handed to it with ttl_ms, and the
-- handoff message names attempt, the try that wrote the ticket, so that
-- the waiter counts its lease from when it sent that try.

-- live_head returns the first waiter whose ticket has not expired, with
-- its ttl and attempt, dropping expired tickets on the way; nil when none.
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
    now = now or math.floor(clock_us() / 1000)
    local t = redis.call('HGET', KEYS[4], h)
    if t then
      local a = string.find(t, ':', 1, true)
      local b = a and string.find(t, ':', a + 1, true)
      -- a ticket that is not "expiry:ttl:attempt" with a ttl of at least
      -- 1ms is dropped like an expired one
      local exp = b and tonumber(string.sub(t, 1, a - 1))
      local ttl = b and tonumber(string.sub(t, a + 1, b - 1))
      if exp and ttl and exp > now and ttl >= 1 and ttl == math.floor(ttl) then
        return h, string.sub(t, a + 1, b - 1), string.sub(t, b + 1)
      end
    end
    redis.call('ZREM', KEYS[3], h)
    redis.call('HDEL', KEYS[4], h)
  end
end

-- enqueue puts holder in the queue (keeping its place if it is there) and
-- writes its ticket; both keys expire with the last ticket.
local function enqueue(holder, ttl, ticket_ms, attempt)
  local us = clock_us()
  redis.call('ZADD', KEYS[3], 'NX', us, holder)
  redis.call('HSET', KEYS[4], holder, fmt(math.floor(us / 1000) + tonumber(ticket_ms)) .. ':' .. ttl .. ':' .. attempt)
  redis.call('PEXPIRE', KEYS[3], ticket_ms)
  redis.call('PEXPIRE', KEYS[4], ticket_ms)
end

local function dequeue(holder)
  if redis.call('ZREM', KEYS[3], holder) == 1 then
    redis.call('HDEL', KEYS[4], holder)
  end
end

-- publish sends msg on a lock's channel: with SPUBLISH when sharded is '1'
-- (the channel shares the lock's hash slot, so it is the script's own
-- shard), else with PUBLISH. A server without sharded pub/sub refuses
-- SPUBLISH and gets PUBLISH, as its waiters get SUBSCRIBE (see pubsub.go).
local function publish(channel, msg, sharded)
  if sharded == '1' then
    local r = redis.pcall('SPUBLISH', channel, msg)
    if type(r) ~= 'table' or not r.err then
      return
    end
  end
  redis.call('PUBLISH', channel, msg)
end

-- hand_off lets go of the lock, which the caller holds: it gives it to the
-- live head of the queue with a new token (overwriting the caller's value)
-- and tells it so, "holder:seq:attempt", or deletes it when nobody waits.
-- Past 2^53-1 it returns an error reply and changes nothing but the
-- expired tickets it dropped; else nil.
local function hand_off(channel, counter_ttl, clock_floor, sharded)
  local head, ttl, attempt = live_head()
  if not head then
    redis.call('DEL', KEYS[1])
    return nil
  end
  local seq = next_seq(counter_ttl, clock_floor)
  if not seq then
    return redis.error_reply('fencelock: counter past 2^53-1')
  end
  redis.call('SET', KEYS[1], head .. ':' .. fmt(seq), 'PX', ttl)
  dequeue(head)
  publish(channel, head .. ':' .. fmt(seq) .. ':' .. attempt, sharded)
  return nil
end

-- let_go releases a fair lock if holder has it, handing it on (hand_off).
-- Returns 1 when released, 0 when the lock is gone or held by another, or
-- an error reply.
local function let_go(holder, channel, counter_ttl, clock_floor, sharded)
  if not held_by(holder) then
    return 0
  end
  local err = hand_off(channel, counter_ttl, clock_floor, sharded)
  if err then
    return err
  end
  return 1
end
