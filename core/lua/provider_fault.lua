-- Provider-fault detection for one provider, shared by every worker
-- (delivery/services/provider_faults.py): the same permanent error for N distinct recipients
-- in a row means the provider is broken, not N bad addresses.
-- KEYS[1] streak hash   notifier:fault:<provider>:streak      sig (the error being counted)
-- KEYS[2] streak set    notifier:fault:<provider>:recipients  distinct recipients in the streak
-- KEYS[3] streak hash   notifier:fault:<provider>:messages    message id -> sig, in the streak
-- KEYS[4] fault hash    notifier:fault:<provider>             sig, recipients, detected_at (ms)
-- KEYS[5] put-back hash notifier:fault:<provider>:put_back    message id -> sig, to re-queue
-- ARGV: now_ms, threshold, ttl_ms, then per result, in order: kind, sig, recipient, message id
--   kind: ok (accepted), reset (a permanent error about that mailbox), perm (any other)
-- Returns {fault sig or '', 1 if this call completed the streak else 0}
local streak, recipients, ids, fault, put_back = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local now, threshold, ttl = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local faulty = redis.call('HGET', fault, 'sig') or ''
local detected = 0

local function reset()
  redis.call('DEL', streak, recipients, ids)
end

local function count(sig, rcpt, id)
  if redis.call('HGET', streak, 'sig') ~= sig then
    reset()  -- a different error: the streak starts again
    redis.call('HSET', streak, 'sig', sig)
  end
  redis.call('SADD', recipients, rcpt)
  redis.call('HSET', ids, id, sig)
  local n = redis.call('SCARD', recipients)
  if n < threshold then return end
  redis.call('HSET', fault, 'sig', sig, 'recipients', n, 'detected_at', now)
  -- Every message of the streak may have been marked FAILED already: hand them to put-back.
  local held = redis.call('HGETALL', ids)
  for i = 1, #held, 2 do redis.call('HSET', put_back, held[i], held[i + 1]) end
  redis.call('PEXPIRE', put_back, ttl)
  reset()
  faulty, detected = sig, 1
end

for i = 4, #ARGV, 4 do
  local kind, sig, rcpt, id = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  if kind == 'ok' then
    -- An acceptance proves the provider works: no streak, no fault.
    reset()
    redis.call('DEL', fault)
    faulty, detected = '', 0
  elseif kind == 'reset' then
    reset()
  elseif sig ~= faulty then  -- the fault's own error is no news while it lasts
    count(sig, rcpt, id)
  end
end
if faulty ~= '' then redis.call('PEXPIRE', fault, ttl) end
for _, key in ipairs({streak, recipients, ids}) do redis.call('PEXPIRE', key, ttl) end
return {faulty, detected}
