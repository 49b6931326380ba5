-- Acknowledge claimed ids: remove each from the processing ZSET only while it still carries
-- this claim's lease deadline. A late scheduler whose lease expired (the reaper returned its ids
-- and another scheduler re-claimed them) must not remove the other scheduler's claim.
-- KEYS[1] = processing ZSET
-- ARGV[1] = lease deadline of this claim, ARGV[2..] = ids
-- Returns how many were removed.
local removed = 0
local deadline = tonumber(ARGV[1])
for i = 2, #ARGV do
  local score = redis.call('ZSCORE', KEYS[1], ARGV[i])
  if score and tonumber(score) == deadline then
    removed = removed + redis.call('ZREM', KEYS[1], ARGV[i])
  end
end
return removed
