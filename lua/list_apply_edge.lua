-- list_apply_edge.lua: apply one edge's latest state to a cached list — only
-- if that list is cached, so no partial list is ever created.
--
-- KEYS[1]  the list, a ZSet: member = 19-digit zero-padded user id, score = follow time (ms)
-- KEYS[2]  a hash: member -> edge version of the state last applied (removals included)
-- KEYS[3]  the list's coverage marker; absent means the list is not cached
-- KEYS[4]  the member versions before the list's last fill (list_fill_begin.lua)
-- ARGV[1]  member
-- ARGV[2]  edge version of this state
-- ARGV[3]  '1' active (add), '0' inactive (remove)
-- ARGV[4]  score: follow time in ms, as carried by the event
-- ARGV[5]  how long (ms) the versions outlive the list: removed members'
--          versions are their tombstones, kept through an expiry and a refill
-- ARGV[6]  how long (ms) a removal from a list that is not cached keeps
--          its tombstone: longer than any update sent before it can be late
-- Returns  1 applied, 0 not newer than what the list holds (duplicate or stale), -1 not cached

if redis.call('EXISTS', KEYS[3]) == 0 then
  -- Nothing to update, but a removal leaves its tombstone: an update sent
  -- before it and late past it must meet it even if the list is filled
  -- meanwhile (the fill keeps these versions as its previous generation).
  if ARGV[3] == '0' then
    local seen = tonumber(redis.call('HGET', KEYS[2], ARGV[1]))
    if not seen or seen < tonumber(ARGV[2]) then
      redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
      if redis.call('PTTL', KEYS[2]) < tonumber(ARGV[6]) then
        redis.call('PEXPIRE', KEYS[2], ARGV[6])
      end
    end
  end
  return -1
end
local seen = tonumber(redis.call('HGET', KEYS[2], ARGV[1]))
  or tonumber(redis.call('HGET', KEYS[4], ARGV[1]))
if seen and seen >= tonumber(ARGV[2]) then
  return 0
end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
if ARGV[3] == '1' then
  redis.call('ZADD', KEYS[1], ARGV[4], ARGV[1])
else
  redis.call('ZREM', KEYS[1], ARGV[1])
end
-- The list never outlives its coverage marker; its versions outlive both a
-- while, so that an update delayed past a removal meets the tombstone even
-- if the list expired and was filled again meanwhile.
local ttl = redis.call('PTTL', KEYS[3])
if ttl > 0 then
  redis.call('PEXPIRE', KEYS[1], ttl)
  redis.call('PEXPIRE', KEYS[2], ttl + tonumber(ARGV[5]))
end
return 1
