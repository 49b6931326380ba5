-- Extend a lock only if this holder still owns it (compare-and-expire).
-- KEYS[1] = lock key, ARGV[1] = holder token, ARGV[2] = TTL in milliseconds. Returns 1 if held.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
