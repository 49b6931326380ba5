-- Add (score, id) pairs to the due ZSET unless the id is currently claimed (in processing):
-- rebuilding after Redis loss must not put a claimed id back next to its claim.
-- KEYS[1] = due ZSET, KEYS[2] = processing ZSET
-- ARGV = score1, id1, score2, id2, ...
-- Returns how many ids were added or moved.
local added = 0
for i = 1, #ARGV, 2 do
  if not redis.call('ZSCORE', KEYS[2], ARGV[i + 1]) then
    redis.call('ZADD', KEYS[1], ARGV[i], ARGV[i + 1])
    added = added + 1
  end
end
return added
