-- fenced.lua (after check.lua): the built-in fenced writes.
--
-- ARGV[3] the operation:
--   claim  no write
--   set    SET KEYS[2] ARGV[4], with PX ARGV[5] when ARGV[5] > 0
--   hset   HSET KEYS[2] ARGV[4] ARGV[5] ...
-- Returns {1} when the token is accepted.
local op = ARGV[3]
if op == 'set' then
  local px = tonumber(ARGV[5])
  if px > 0 then
    redis.call('SET', KEYS[2], ARGV[4], 'PX', px)
  else
    redis.call('SET', KEYS[2], ARGV[4])
  end
elseif op == 'hset' then
  redis.call('HSET', KEYS[2], unpack(ARGV, 4))
elseif op ~= 'claim' then
  return redis.error_reply('fencelock: unknown operation ' .. tostring(op))
end
advance()
return {1}
