-- Circuit breaker for one provider, shared by every worker (delivery/services/circuit_breaker.py).
-- KEYS[1] state hash   notifier:breaker:<provider>        fields state, until, probe_until,
--                                                          failures, window_start
-- KEYS[2] events list  notifier:breaker:<provider>:events "<ms> <from> -> <to> (<reason>)"
-- ARGV: op (allow|success|failure|open), now_ms, threshold, window_ms, cooldown_ms, probe_ms,
--       hold_ms (failure only: a Retry-After; opens at once for that long),
--       reason (open only: opens at once for the cooldown, e.g. a provider fault)
-- Returns {decision_or_state, transition, wait_ms} where transition is "" or "<from> -> <to>"
-- and wait_ms (deny only) is how long until this worker may ask again; an allow of a closed
-- breaker adds its failure count.
local key, events = KEYS[1], KEYS[2]
local op, now = ARGV[1], tonumber(ARGV[2])
local threshold, window, cooldown, probe = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local hold = tonumber(ARGV[7] or "0")
local state = redis.call('HGET', key, 'state') or 'closed'

local function move(to, reason)
  if to == state then return '' end
  local line = now .. ' ' .. state .. ' -> ' .. to .. ' (' .. reason .. ')'
  redis.call('LPUSH', events, line)
  redis.call('LTRIM', events, 0, 99)
  redis.call('HSET', key, 'state', to)
  return state .. ' -> ' .. to
end

local function open_for(ms, reason)
  redis.call('HSET', key, 'until', now + ms, 'probe_until', 0, 'failures', 0)
  return move('open', reason)
end

if op == 'allow' then
  -- Closed: also the failure count, so a caller that saw none may skip its success write.
  if state == 'closed' then return {'allow', '', 0, tonumber(redis.call('HGET', key, 'failures') or '0')} end
  local open_until = tonumber(redis.call('HGET', key, 'until') or '0')
  if state == 'open' and now < open_until then
    return {'deny', '', open_until - now}
  end
  -- Cooldown over: half-open, and only one worker at a time may probe.
  local probe_until = tonumber(redis.call('HGET', key, 'probe_until') or '0')
  if now < probe_until then return {'deny', '', math.min(probe_until - now, 1000)} end
  redis.call('HSET', key, 'probe_until', now + probe)
  return {'probe', move('half_open', 'cooldown over')}
elseif op == 'success' then
  redis.call('HSET', key, 'failures', 0, 'window_start', now)
  if state ~= 'closed' then
    redis.call('HSET', key, 'probe_until', 0)
    return {'closed', move('closed', 'success')}
  end
  return {'closed', ''}
elseif op == 'failure' then
  if hold > 0 then return {'open', open_for(math.max(hold, 1), 'retry-after')} end
  if state == 'half_open' then return {'open', open_for(cooldown, 'probe failed')} end
  if state == 'open' then return {'open', ''} end
  -- The window opens at the first failure counted (a success that found nothing to reset is
  -- not written: delivery/services/circuit_breaker.py).
  local started = tonumber(redis.call('HGET', key, 'window_start') or '0')
  local counted = tonumber(redis.call('HGET', key, 'failures') or '0')
  if now - started > window or counted == 0 then
    redis.call('HSET', key, 'failures', 0, 'window_start', now)
  end
  local failures = redis.call('HINCRBY', key, 'failures', 1)
  if failures >= threshold then
    return {'open', open_for(cooldown, failures .. ' failures in ' .. window .. ' ms')}
  end
  return {'closed', ''}
elseif op == 'open' then
  return {'open', open_for(cooldown, ARGV[8] or 'opened')}
end
return redis.error_reply('unknown op ' .. tostring(op))
