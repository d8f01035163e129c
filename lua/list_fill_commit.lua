-- list_fill_commit.lua: merge rows read from PostgreSQL into a claimed list
-- cache and record how much of the list it now covers.
--
-- KEYS[1]  the list ZSet
-- KEYS[2]  the member -> version hash
-- KEYS[3]  the coverage marker, holding 'filling:<token>'
-- ARGV[1]  the token of list_fill_begin
-- ARGV[2]  TTL of the cache in ms
-- ARGV[3]  coverage: 'all', or '<score>:<member>' of the oldest entry read
--          (the cache holds every edge from there to the newest)
-- ARGV[4…] triples: member, score, edge version
-- Returns  1 committed, 0 the claim was lost (nothing written)

if redis.call('GET', KEYS[3]) ~= 'filling:' .. ARGV[1] then
  return 0
end
for i = 4, #ARGV, 3 do
  local member, score, version = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2])
  local seen = tonumber(redis.call('HGET', KEYS[2], member))
  -- A newer state applied during the fill wins over the rows read before it.
  if not seen or seen < version then
    redis.call('HSET', KEYS[2], member, version)
    redis.call('ZADD', KEYS[1], score, member)
  end
end
redis.call('SET', KEYS[3], ARGV[3], 'PX', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('PEXPIRE', KEYS[2], ARGV[2])
return 1
