-- list_fill_begin.lua: claim the right to fill a list cache from PostgreSQL.
--
-- While the claim stands, edge updates are applied to the list (the marker
-- exists), so a change committed after the filler's read is not lost; the
-- fill then merges its rows under the same per-member versions.
--
-- KEYS[1]  the list ZSet
-- KEYS[2]  the member -> version hash
-- KEYS[3]  the coverage marker
-- KEYS[4]  the member versions before this fill (tombstones, kept a while)
-- ARGV[1]  a token naming this filler
-- ARGV[2]  lease in ms: a filler that dies frees the claim when it ends
-- ARGV[3]  '1' rebuilds a list that is cached (a repair); 'worn' fills afresh
--          a partly cached list whose covered head holds fewer than ARGV[5]
--          edges (unfollows wore it down), keeping its versions; else '0'
-- ARGV[4]  how long (ms) the previous versions are kept
-- ARGV[5]  with 'worn': the edges a covered head must hold to be kept
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
  if ARGV[3] == 'worn' then
    -- Kept when its ARGV[5]-th newest edge is covered, by the rule of
    -- list_page.lua: (score, member) at or above the bound, ties larger
    -- member first.
    local sep = string.find(marker, ':', 1, true)
    if not sep then
      return 0
    end
    local bound_score = tonumber(string.sub(marker, 1, sep - 1))
    local bound_member = string.sub(marker, sep + 1)
    local nth = tonumber(ARGV[5]) - 1
    local edge = redis.call('ZRANGE', KEYS[1], nth, nth, 'REV', 'WITHSCORES')
    if #edge == 2 then
      local score = tonumber(edge[2])
      if score > bound_score or (score == bound_score and edge[1] >= bound_member) then
        return 0
      end
    end
  elseif ARGV[3] ~= '1' then
    return 0
  end
end
-- Leftovers (an expired or rebuilt cache) might hold members removed since:
-- the list starts afresh. The versions of an expired cache are kept as the
-- previous generation, for ARGV[4] ms: a removed member's version is its
-- tombstone, and an update delayed past its removal must still meet it
-- (list_apply_edges.lua and list_fill_commit.lua read both generations). One
-- generation only: a RENAME replaces an older one. A repair starts from
-- nothing (versions it would keep could be the wrong ones it repairs). A
-- worn list keeps both generations: its versions are current, tombstones
-- included, and the previous ones keep their grace.
redis.call('DEL', KEYS[1])
if ARGV[3] == '1' then
  redis.call('DEL', KEYS[2], KEYS[4])
elseif not (marker and ARGV[3] == 'worn') and redis.call('EXISTS', KEYS[2]) == 1 then
  redis.call('RENAME', KEYS[2], KEYS[4])
  redis.call('PEXPIRE', KEYS[4], ARGV[4])
end
redis.call('SET', KEYS[3], 'filling:' .. ARGV[1], 'PX', ARGV[2])
return 1
