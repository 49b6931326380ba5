-- Claim up to ARGV[2] due message ids: move them from the due ZSET to the processing ZSET,
-- scored with the lease deadline. Atomic, so two schedulers never claim the same id at once.
-- KEYS[1] = due ZSET, KEYS[2] = processing ZSET
-- ARGV[1] = now (epoch seconds), ARGV[2] = limit, ARGV[3] = lease deadline (epoch seconds)
-- Returns the claimed ids.
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
if #ids == 0 then
  return ids
end
local chunk = 500  -- stay far below Lua's unpack() limit
for i = 1, #ids, chunk do
  local last = math.min(i + chunk - 1, #ids)
  local args = {}
  for j = i, last do
    args[#args + 1] = ARGV[3]
    args[#args + 1] = ids[j]
  end
  redis.call('ZADD', KEYS[2], unpack(args))
  redis.call('ZREM', KEYS[1], unpack(ids, i, last))
end
return ids
