-- Sliding-window-log rate limit: at most ARGV[1] hits in any ARGV[2] milliseconds.
-- KEYS[1]  ZSET of accepted hits (score = Redis server time in microseconds)
-- ARGV[1]  limit, ARGV[2] window in ms, ARGV[3] a unique member suffix (request nonce)
-- Returns {allowed (1|0), hits in window, retry-after in ms (0 when allowed)}.
-- The clock is Redis's own TIME, so every web process shares one clock; the whole check-and-add
-- is one script, so concurrent requests from many processes can never exceed the limit.
local limit = tonumber(ARGV[1])
local window_us = tonumber(ARGV[2]) * 1000
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window_us)
local hits = redis.call('ZCARD', KEYS[1])
if hits < limit then
  redis.call('ZADD', KEYS[1], now, now .. ':' .. ARGV[3])
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {1, hits + 1, 0}
end
local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local retry_ms = math.ceil((tonumber(oldest[2]) + window_us - now) / 1000)
return {0, hits, math.max(retry_ms, 1)}
