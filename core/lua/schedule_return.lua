-- Give claimed ids back to the due set with new scores (claimed early, or rescheduled), but
-- only where this claim still holds them.
-- KEYS[1] = processing ZSET, KEYS[2] = due ZSET
-- ARGV[1] = lease deadline of this claim, ARGV[2..] = score1, id1, score2, id2, ...
-- Returns how many were returned.
local returned = 0
local deadline = tonumber(ARGV[1])
for i = 2, #ARGV, 2 do
  local score = redis.call('ZSCORE', KEYS[1], ARGV[i + 1])
  if score and tonumber(score) == deadline then
    redis.call('ZREM', KEYS[1], ARGV[i + 1])
    redis.call('ZADD', KEYS[2], ARGV[i], ARGV[i + 1])
    returned = returned + 1
  end
end
return returned
