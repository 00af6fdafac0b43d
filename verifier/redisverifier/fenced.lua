-- fenced.lua (after check.lua): the built-in fenced writes.
--
-- ARGV[4] the operation:
--   claim  no write
--   set    SET KEYS[2] ARGV[5], with PX ARGV[6] when ARGV[6] > 0
--   hset   HSET KEYS[2] ARGV[5] ARGV[6] ...
-- Returns {1} when the token is accepted.
local op = ARGV[4]
if op == 'set' then
  local px = tonumber(ARGV[6])
  if px > 0 then
    redis.call('SET', KEYS[2], ARGV[5], 'PX', px)
  else
    redis.call('SET', KEYS[2], ARGV[5])
  end
elseif op == 'hset' then
  redis.call('HSET', KEYS[2], unpack(ARGV, 5))
elseif op ~= 'claim' then
  return redis.error_reply('fencelock: unknown operation ' .. tostring(op))
end
advance()
return {1}
