-- Release a lock only if this holder still owns it (compare-and-delete).
-- KEYS[1] = lock key, ARGV[1] = holder token. Returns 1 if released.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
