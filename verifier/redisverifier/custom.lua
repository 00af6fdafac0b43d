-- custom.lua (after the caller's body, wrapped as "local function
-- write(KEYS, ARGV, FENCE_SEQ, FENCE_HOLDER) ... end" from line 1 so that
-- Redis' line numbers are the body's own, and then check.lua): runs the
-- caller's write with its own keys and arguments, then raises the
-- high-water. Returns {1, the body's result}. A body that returns
-- redis.error_reply(...) fails the script like one that raises an error:
-- the high-water stays where it was.
local result = write({unpack(KEYS, 2)}, {unpack(ARGV, 4)}, ARGV[1], holder)
if type(result) == 'table' and result.err then
  return result
end
advance()
return {1, result}
