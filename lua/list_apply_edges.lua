-- list_apply_edges.lua: apply the latest states of edges to one cached list —
-- only if that list is cached, so no partial list is ever created. One call
-- per list and batch: a move's batch adds hundreds of members to one list.
--
-- KEYS[1]  the list, a ZSet: member = 19-digit zero-padded user id, score = follow time (ms)
-- KEYS[2]  a hash: member -> edge version of the state last applied (removals included)
-- KEYS[3]  the list's coverage marker; absent means the list is not cached
-- KEYS[4]  the member versions before the list's last fill (list_fill_begin.lua)
-- ARGV[1]  how long (ms) the versions outlive the list: removed members'
--          versions are their tombstones, kept through an expiry and a refill
-- ARGV[2]  how long (ms) a removal from a list that is not cached keeps
--          its tombstone: longer than any update sent before it can be late
-- ARGV[3..] the edges, four arguments each, applied in order:
--          member; edge version of this state; '1' active (add) or
--          '0' inactive (remove); score: follow time in ms, as carried by the event
-- Returns  how many states were applied (the others were not newer than
--          what the list holds: duplicates or stale), -1 not cached

if redis.call('EXISTS', KEYS[3]) == 0 then
  -- Nothing to update, but a removal leaves its tombstone: an update sent
  -- before it and late past it must meet it even if the list is filled
  -- meanwhile (the fill keeps these versions as its previous generation).
  local marked = false
  for i = 3, #ARGV, 4 do
    if ARGV[i + 2] == '0' then
      local seen = tonumber(redis.call('HGET', KEYS[2], ARGV[i]))
      if not seen or seen < tonumber(ARGV[i + 1]) then
        redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1])
        marked = true
      end
    end
  end
  if marked and redis.call('PTTL', KEYS[2]) < tonumber(ARGV[2]) then
    redis.call('PEXPIRE', KEYS[2], ARGV[2])
  end
  return -1
end
local applied = 0
for i = 3, #ARGV, 4 do
  local member, version = ARGV[i], tonumber(ARGV[i + 1])
  local seen = tonumber(redis.call('HGET', KEYS[2], member))
    or tonumber(redis.call('HGET', KEYS[4], member))
  if not seen or seen < version then
    redis.call('HSET', KEYS[2], member, ARGV[i + 1])
    if ARGV[i + 2] == '1' then
      redis.call('ZADD', KEYS[1], ARGV[i + 3], member)
    else
      redis.call('ZREM', KEYS[1], member)
    end
    applied = applied + 1
  end
end
-- The list never outlives its coverage marker; its versions outlive both a
-- while, so that an update delayed past a removal meets the tombstone even
-- if the list expired and was filled again meanwhile.
if applied > 0 then
  local ttl = redis.call('PTTL', KEYS[3])
  if ttl > 0 then
    redis.call('PEXPIRE', KEYS[1], ttl)
    redis.call('PEXPIRE', KEYS[2], ttl + tonumber(ARGV[1]))
  end
end
return applied
