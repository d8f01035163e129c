-- list_fill_commit.lua: merge rows read from PostgreSQL into a claimed list
-- cache and record how much of the list it now covers.
--
-- KEYS[1]  the list ZSet
-- KEYS[2]  the member -> version hash
-- KEYS[3]  the coverage marker, holding 'filling:<token>'
-- KEYS[4]  the member versions before this fill (list_fill_begin.lua)
-- ARGV[1]  the token of list_fill_begin
-- ARGV[2]  TTL of the cache in ms
-- ARGV[3]  coverage: 'all', or '<score>:<member>' of the oldest entry read
--          (the cache holds every edge from there to the newest)
-- ARGV[4]  how long (ms) versions outlive the list (list_apply_edges.lua)
-- ARGV[5…] triples: member, score, edge version
-- Returns  0 the claim was lost (nothing written); else { 1, members… }: the
--          members the list holds that the rows did not name — added by
--          updates applied while the fill ran, which the filler checks
--          against the truth (such an update may have been delayed past a
--          removal whose tombstone had expired)

if redis.call('GET', KEYS[3]) ~= 'filling:' .. ARGV[1] then
  return 0
end
local read = {}
for i = 5, #ARGV, 3 do
  local member, score, version = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2])
  read[member] = true
  local seen = tonumber(redis.call('HGET', KEYS[2], member))
    or tonumber(redis.call('HGET', KEYS[4], member))
  -- A newer state applied during the fill wins over the rows read before it
  -- (as does a tombstone of the previous generation); a version held
  -- already is the same state (its member may have left the ZSet with the
  -- leftovers list_fill_begin.lua dropped).
  if not seen or seen <= version then
    redis.call('HSET', KEYS[2], member, version)
    redis.call('ZADD', KEYS[1], score, member)
  end
end
redis.call('SET', KEYS[3], ARGV[3], 'PX', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('PEXPIRE', KEYS[2], tonumber(ARGV[2]) + tonumber(ARGV[4]))
local out = { 1 }
for _, member in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  if not read[member] then
    out[#out + 1] = member
  end
end
return out
