-- Add (score, id) pairs to the due ZSET unless the id is currently claimed (in processing):
-- rebuilding after Redis loss must not put a claimed id back next to its claim.
-- KEYS[1] = due ZSET, KEYS[2] = processing ZSET
-- ARGV[1] = "write", or "count" for a dry run: the same checks, nothing written, so a dry run
--           reports exactly what the real run would add
-- ARGV[2..] = score1, id1, score2, id2, ...
-- Returns how many ids were (or would be) added or moved.
local write = ARGV[1] == 'write'
local added = 0
for i = 2, #ARGV, 2 do
  if not redis.call('ZSCORE', KEYS[2], ARGV[i + 1]) then
    if write then
      redis.call('ZADD', KEYS[1], ARGV[i], ARGV[i + 1])
    end
    added = added + 1
  end
end
return added
