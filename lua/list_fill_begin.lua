-- list_fill_begin.lua: claim the right to fill a list cache from PostgreSQL.
--
-- While the claim stands, edge updates are applied to the list (the marker
-- exists), so a change committed after the filler's read is not lost; the
-- fill then merges its rows under the same per-member versions.
--
-- KEYS[1]  the list ZSet
-- KEYS[2]  the member -> version hash
-- KEYS[3]  the coverage marker
-- ARGV[1]  a token naming this filler
-- ARGV[2]  lease in ms: a filler that dies frees the claim when it ends
-- ARGV[3]  '1' rebuilds a list that is cached (a repair), else '0'
-- ARGV[4]  how long (ms) versions outlive the list (list_apply_edge.lua)
-- Returns  1 this caller fills (or already claimed it), 0 the list is already cached,
--          -1 another fill is running

local marker = redis.call('GET', KEYS[3])
if marker then
  -- The same filler asking again (a pipeline run twice) keeps its claim.
  if marker == 'filling:' .. ARGV[1] then
    return 1
  end
  if string.sub(marker, 1, 8) == 'filling:' then
    return -1
  end
  if ARGV[3] ~= '1' then
    return 0
  end
end
-- Leftovers (an expired or rebuilt cache) might hold members removed since:
-- the list starts afresh. The versions stay: a removed member's version is
-- its tombstone, and an update delayed past its removal must still find it
-- (list_fill_commit.lua merges rows of the same version as what they hold).
redis.call('DEL', KEYS[1])
local keep = tonumber(ARGV[2]) + tonumber(ARGV[4])
if redis.call('PTTL', KEYS[2]) >= 0 and redis.call('PTTL', KEYS[2]) < keep then
  redis.call('PEXPIRE', KEYS[2], keep)
end
redis.call('SET', KEYS[3], 'filling:' .. ARGV[1], 'PX', ARGV[2])
return 1
