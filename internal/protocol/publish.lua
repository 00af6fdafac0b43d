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
