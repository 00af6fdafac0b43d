-- Shared functions of the lock and its counter, prepended to the scripts
-- that take, pass on or lift a lock's counter (queue.lua and publish.lua
-- hold the fair queue's and the release message's; a script is composed of
-- only the parts it uses, because Lua builds every function of a script on
-- every call: see luagen, which writes each script whole into scripts/).
-- The functions take the scripts' arguments as parameters and read no
-- ARGV. Every such script has KEYS[1] lock, KEYS[2] counter, KEYS[3]
-- ahead (see store_counter), and for the fair lock KEYS[4] queue (a sorted
-- set of holder ids by arrival), KEYS[5] tickets (a hash: holder id ->
-- ticket, see ticket.go) and KEYS[6] waiting (see queue.lua's enqueue).
-- The formats of the lock's value, the ticket and the release message are
-- documented, parsed and tested in Go (package protocol); these files are
-- their only writer.

-- LOCK, COUNTER and AHEAD are the keys the functions below work on:
-- KEYS[1..3], the lock's; a semaphore's scripts point them at one of its
-- slots (permit.lua's at_slot), each a lock with its own counter.
local LOCK, COUNTER, AHEAD = KEYS[1], KEYS[2], KEYS[3]

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
--
-- A v above the clock also sets the ahead key (AHEAD) until the clock
-- passes v. While that key is missing, the counter is at or below the
-- clock, so the next Seq, one more, is too (a script call takes more than
-- the clock's microsecond), and needs no clock: now is then nil.
local function store_counter(v, ttl_ms, now)
  local s = fmt(v)
  local past = 0 -- ms until the clock passes v
  if now and v > now then
    -- 2ms of margin: Redis 7.2 counts PX from the script's start, a
    -- moment before TIME was read
    past = math.ceil((v - now) / 1000) + 2
    redis.call('SET', AHEAD, '1', 'PX', past)
  end
  if ttl_ms == '0' then
    redis.call('SET', COUNTER, s)
  else
    redis.call('SET', COUNTER, s, 'PX', math.max(tonumber(ttl_ms), past))
  end
  return s
end

-- counter_now is the counter's value, or the clock when it is missing: a
-- missing counter stands where a new one would start. c is the counter as
-- read (GET or MGET: false when missing), or nil to read it here.
local function counter_now(now, c)
  if c == nil then
    c = redis.call('GET', COUNTER)
  end
  if c then
    return tonumber(c), true
  end
  return now, false
end

-- next_seq is the next token Seq, which the counter takes: one more than
-- the counter (the clock itself when it is missing), lifted to the clock
-- first when clock_floor is '1'. c is as for counter_now; now is the clock
-- (clock_us) if the script has read it already; ahead is the ahead key as
-- read (false when missing), or nil. The clock is read only when the
-- counter may be above it, is missing or is lifted to it (see
-- store_counter). Returns nil past 2^53-1, else the Seq and its text (fmt).
local function next_seq(counter_ttl, clock_floor, c, now, ahead)
  if c and ahead == false and not now and clock_floor ~= '1' then
    local seq = tonumber(c) + 1
    if seq > MAX_SEQ then
      return nil
    end
    return seq, store_counter(seq, counter_ttl, nil)
  end
  now = now or clock_us()
  local cur, present = counter_now(now, c)
  local seq = cur + 1
  if not present then
    seq = now -- the clock passed every value the counter held: it expired after
  end
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
-- the counter settings counter_ttl and clock_floor (as for next_seq); c,
-- now and ahead are as for next_seq. Returns the acquire's reply {1, seq},
-- or an error reply past 2^53-1.
local function take(holder, ttl, counter_ttl, clock_floor, c, now, ahead)
  local n, s = next_seq(counter_ttl, clock_floor, c, now, ahead)
  if not n then
    return redis.error_reply('fencelock: counter past 2^53-1')
  end
  redis.call('SET', LOCK, holder .. ':' .. s, 'PX', ttl)
  return {1, n}
end
