-- Return claims whose lease expired (their scheduler died or stalled) to the due ZSET, due now.
-- KEYS[1] = processing ZSET, KEYS[2] = due ZSET
-- ARGV[1] = now (epoch seconds), ARGV[2] = limit
-- Returns the reaped ids.
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
for _, id in ipairs(ids) do
  redis.call('ZADD', KEYS[2], 'NX', ARGV[1], id)
  redis.call('ZREM', KEYS[1], id)
end
return ids
