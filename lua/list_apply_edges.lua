-- list_apply_edges.lua: apply the latest states of edges to cached lists —
-- each list only if it is cached, so no partial list is ever created. A
-- move's batch adds hundreds of members to one list; one call applies them
-- to one list (on Redis Cluster, whose four keys share a slot) or to many
-- (on one Redis server: a call costs Redis several times the writes in it).
--
-- KEYS     per list, four keys:
--          the list, a ZSet: member = 19-digit zero-padded user id, score = follow time (ms);
--          a hash: member -> edge version of the state last applied (removals included);
--          the list's coverage marker; absent means the list is not cached;
--          the member versions before the list's last fill (list_fill_begin.lua)
-- ARGV[1]  how long (ms) the versions outlive the list: removed members'
--          versions are their tombstones, kept through an expiry and a refill
-- ARGV[2]  how long (ms) a removal from a list that is not cached keeps
--          its tombstone: longer than any update sent before it can be late
-- ARGV[3..] per list, in the order of KEYS: how many states follow, then
--          the states, four arguments each, applied in order: member; edge
--          version of this state; '1' active (add) or '0' inactive
--          (remove); score: follow time in ms, as carried by the event
-- Returns  per list: how many states were applied (the others were not
--          newer than what the list holds: duplicates or stale), or -1 when
--          it is not cached

local grace, uncached = tonumber(ARGV[1]), ARGV[2]

local function apply(list, versions, coverage, previous, first, last)
  if redis.call('EXISTS', coverage) == 0 then
    -- Nothing to update, but a removal leaves its tombstone: an update sent
    -- before it and late past it must meet it even if the list is filled
    -- meanwhile (the fill keeps these versions as its previous generation).
    local marked = false
    for i = first, last, 4 do
      if ARGV[i + 2] == '0' then
        local seen = tonumber(redis.call('HGET', versions, ARGV[i]))
        if not seen or seen < tonumber(ARGV[i + 1]) then
          redis.call('HSET', versions, ARGV[i], ARGV[i + 1])
          marked = true
        end
      end
    end
    if marked and redis.call('PTTL', versions) < tonumber(uncached) then
      redis.call('PEXPIRE', versions, uncached)
    end
    return -1
  end
  local applied = 0
  for i = first, last, 4 do
    local member, version = ARGV[i], tonumber(ARGV[i + 1])
    local seen = tonumber(redis.call('HGET', versions, member))
      or tonumber(redis.call('HGET', previous, member))
    if not seen or seen < version then
      redis.call('HSET', versions, member, ARGV[i + 1])
      if ARGV[i + 2] == '1' then
        redis.call('ZADD', list, ARGV[i + 3], member)
      else
        redis.call('ZREM', list, member)
      end
      applied = applied + 1
    end
  end
  -- The list never outlives its coverage marker; its versions outlive both a
  -- while, so that an update delayed past a removal meets the tombstone even
  -- if the list expired and was filled again meanwhile.
  if applied > 0 then
    local ttl = redis.call('PTTL', coverage)
    if ttl > 0 then
      redis.call('PEXPIRE', list, ttl)
      redis.call('PEXPIRE', versions, ttl + grace)
    end
  end
  return applied
end

local out = {}
local at = 3
for k = 1, #KEYS, 4 do
  local n = tonumber(ARGV[at])
  local first = at + 1
  local last = at + 4 * n
  out[#out + 1] = apply(KEYS[k], KEYS[k + 1], KEYS[k + 2], KEYS[k + 3], first, last)
  at = last + 1
end
return out
