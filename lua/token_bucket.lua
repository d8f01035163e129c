-- token_bucket.lua: take tokens from one actor's bucket.
--
-- KEYS[1]  the bucket, a hash {tokens = float, ts = ms of the last update}
-- ARGV[1]  capacity, whole tokens (>= 1)
-- ARGV[2]  refill rate, tokens per second (> 0, may be fractional)
-- ARGV[3]  cost of this request, whole tokens (>= 1)
-- Returns  { allowed (1 or 0), remaining whole tokens, retry_after_ms (0 when allowed) }
--
-- Time comes from Redis TIME in milliseconds, so every API replica shares one
-- clock. The key expires only after it would have refilled to capacity, so an
-- expired key (read as a full bucket) never hands out tokens early. A clock
-- that steps backwards refills nothing until it passes the stored time again.

local capacity = tonumber(ARGV[1])
local per_ms = tonumber(ARGV[2]) / 1000.0
local cost = tonumber(ARGV[3])

local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)

local state = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(state[1])
local ts = tonumber(state[2])
if tokens == nil or ts == nil then
  tokens = capacity
  ts = now
end
if now > ts then
  tokens = math.min(capacity, tokens + (now - ts) * per_ms)
  ts = now
end

local allowed = 0
local retry_after_ms = 0
if tokens >= cost then
  tokens = tokens - cost
  allowed = 1
else
  retry_after_ms = math.ceil((cost - tokens) / per_ms)
end

redis.call('HSET', KEYS[1], 'tokens', string.format('%.6f', tokens), 'ts', ts)
redis.call('PEXPIRE', KEYS[1], math.ceil((capacity - tokens) / per_ms) + 1000)

return { allowed, math.floor(tokens), retry_after_ms }
