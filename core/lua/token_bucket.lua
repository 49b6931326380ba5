-- Token buckets for one send: the provider's bucket and one bucket per limited recipient domain,
-- taken atomically in one call so concurrent workers share the rates exactly
-- (delivery/services/rate_limits.py documents the keys).
-- KEYS[1]      provider bucket   hash tokens, ts   (ARGV rate 0 = unlimited)
-- KEYS[2..n]   domain buckets    hash tokens, ts
-- ARGV[1] now_ms  ARGV[2] messages to unlimited domains
-- ARGV[3..5] provider rate/s, burst, reserve (tokens only P0 may take; 0 for P0)
-- ARGV[6..]  per domain key: rate/s, burst, requested
-- Returns {wait_ms, granted_unlimited, granted_domain_1, ...}; wait_ms is how long until the
-- first bucket that said no has a token again (0 when everything was granted).
local now = tonumber(ARGV[1])
local unlimited = tonumber(ARGV[2])
local p_rate, p_burst, p_reserve = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])

-- A bucket's time never goes back: `now` is the caller's clock, and a caller whose call reached
-- Redis after a later-stamped one's gets no refill and leaves the later time stored (storing its
-- own would refill those milliseconds twice: a two-caller test saw 116 tokens where 115.99 fit).
local stamps = {}

local function level(key, rate, burst)
  local saved = redis.call('HMGET', key, 'tokens', 'ts')
  local tokens = tonumber(saved[1]) or burst
  local ts = tonumber(saved[2]) or now
  stamps[key] = math.max(now, ts)
  return math.min(burst, tokens + math.max(0, now - ts) * rate / 1000)
end

local function store(key, tokens, rate, burst)
  redis.call('HSET', key, 'tokens', tostring(tokens), 'ts', stamps[key])
  redis.call('PEXPIRE', key, math.ceil(burst / rate * 1000) + 60000)
end

local p_tokens, room = 0, 1e12
if p_rate > 0 then
  p_tokens = level(KEYS[1], p_rate, p_burst)
  room = math.max(0, math.floor(p_tokens - p_reserve))
end

local wait = 0
local granted = math.min(unlimited, room)
local total, wanted = granted, unlimited
local out = {0, granted}
for i = 2, #KEYS do
  local base = 6 + (i - 2) * 3
  local rate, burst, requested = tonumber(ARGV[base]), tonumber(ARGV[base + 1]), tonumber(ARGV[base + 2])
  local tokens = level(KEYS[i], rate, burst)
  local g = math.max(0, math.min(requested, math.floor(tokens), room - total))
  if g < requested and math.floor(tokens) < requested then
    wait = math.max(wait, (1 - (tokens - g)) * 1000 / rate)
  end
  store(KEYS[i], tokens - g, rate, burst)
  out[#out + 1] = g
  total, wanted = total + g, wanted + requested
end

if p_rate > 0 then
  if total < wanted and room <= total then
    wait = math.max(wait, (p_reserve + 1 - (p_tokens - total)) * 1000 / p_rate)
  end
  store(KEYS[1], p_tokens - total, p_rate, p_burst)
end
out[1] = math.ceil(wait)
return out
