-- Shared functions of the lock and its counter, prepended to the scripts
-- that take, pass on or lift a lock's counter (queue.lua and publish.lua
-- hold the fair queue's and the release message's; a script is composed of
-- only the parts it uses, because Lua builds every function of a script on
-- every call: see luagen, which writes each script whole into scripts/).
-- The functions take the scripts' arguments as parameters and read no
-- ARGV. Every such script has KEYS[1] lock, KEYS[2] counter, and
-- for the fair lock KEYS[3] queue (a sorted set of holder ids by arrival)
-- and KEYS[4] tickets (a hash: holder id -> ticket, see ticket.go).
-- The formats of the lock's value, the ticket and the release message are
-- documented, parsed and tested in Go (package protocol); these files are
-- their only writer.

local MAX_SEQ = 9007199254740991 -- 2^53-1: Lua numbers are doubles
-- No input lifts a counter more than this above the clock, in µs: 24h
-- (protocol.MaxAhead). Tokens follow the clock (a counter starts there),
-- so a value further ahead is a forged or mistyped one that would retire
-- the lock.
local MAX_AHEAD = 86400000000

-- clock_us is the server's clock in microseconds.
local function clock_us()
  local t = redis.call('TIME')
  return t[1] * 1000000 + t[2] -- TIME's digits; coerced, cheaper than tonumber
end

-- fmt writes an integer without Lua's 14-digit rounding (tokens near the
-- clock are about 1.8e15).
local function fmt(n)
  return string.format('%d', n)
end

-- too_far returns the error reply for lifting a counter to v, when v is
-- more than MAX_AHEAD above the clock now; else nil.
local function too_far(v, now)
  if v > now + MAX_AHEAD then
    return redis.error_reply('fencelock: poisoned: ' .. fmt(v) .. ' is more than 24h above the server clock ' .. fmt(now))
  end
  return nil
end

-- store_counter writes v as the counter under the counter rule (see
-- counter.go): ttl_ms '0' keeps it forever; otherwise it expires after
-- ttl_ms, or later when v is above the clock, so that by the time it is
-- missing the clock has passed every value it held, and a missing counter
-- restarting at the clock never goes back. It returns v as written (fmt).
local function store_counter(v, ttl_ms, now)
  local s = fmt(v)
  if ttl_ms == '0' then
    redis.call('SET', KEYS[2], s)
    return s
  end
  local px = ttl_ms
  if v > now then
    -- 2ms of margin: Redis 7.2 counts PX from the script's start, a
    -- moment before TIME was read
    px = math.max(tonumber(ttl_ms), math.ceil((v - now) / 1000) + 2)
  end
  redis.call('SET', KEYS[2], s, 'PX', px)
  return s
end

-- counter_now is the counter's value, or the clock when it is missing: a
-- missing counter stands where a new one would start. c is the counter as
-- read (GET or MGET: false when missing), or nil to read it here.
local function counter_now(now, c)
  if c == nil then
    c = redis.call('GET', KEYS[2])
  end
  if c then
    return tonumber(c), true
  end
  return now, false
end

-- next_seq is the next token Seq, which the counter takes: one more than
-- the counter (the clock when it is missing), lifted to the clock first
-- when clock_floor is '1'. c is as for counter_now; now is the clock
-- (clock_us) if the script has read it already. Returns nil past 2^53-1,
-- else the Seq and its text (fmt).
local function next_seq(counter_ttl, clock_floor, c, now)
  now = now or clock_us()
  local seq = counter_now(now, c) + 1
  if clock_floor == '1' and seq < now then
    seq = now
  end
  if seq > MAX_SEQ then
    return nil
  end
  return seq, store_counter(seq, counter_ttl, now)
end

-- holds returns the Seq in the lock's value v (false when the lock is
-- free) when holder has the lock, else nil; and whether anyone has it.
-- The value is "holder:seq"; holder ids have no ':'.
local function holds(v, holder)
  if not v then
    return nil, false
  end
  local n = #holder
  if string.byte(v, n + 1) == 58 and string.sub(v, 1, n) == holder then -- 58 is ':'
    return string.sub(v, n + 2), true
  end
  return nil, true
end

-- take gives the free lock to holder for ttl ms with the next Seq, under
-- the counter settings counter_ttl and clock_floor (as for next_seq); c
-- and now are as for next_seq. Returns the acquire's reply {1, seq}, or
-- an error reply past 2^53-1.
local function take(holder, ttl, counter_ttl, clock_floor, c, now)
  local n, s = next_seq(counter_ttl, clock_floor, c, now)
  if not n then
    return redis.error_reply('fencelock: counter past 2^53-1')
  end
  redis.call('SET', KEYS[1], holder .. ':' .. s, 'PX', ttl)
  return {1, n}
end
