-- list_members.lua: which of some users each of several cached lists holds,
-- with their scores — the answer to "does the list's owner follow them"
-- without a trip to PostgreSQL. One call asks many lists (on Redis Cluster,
-- the lists of one owner, whose keys share a slot): a script call costs
-- Redis several times the lookups in it, so a page's 21 lists in one call
-- cost it about a third of what 21 calls did.
--
-- KEYS     per list, two keys: the list ZSet (member = 19-digit user id,
--          score = follow time ms) and its coverage marker (see list_page.lua)
-- ARGV     per list, in the order of KEYS: how many members are asked (at
--          least one), then those members
-- Returns  per list, in order: { coverage, score1, score2, … } flattened;
--          coverage 0 = not cached (no scores follow), 1 = the whole list is
--          cached, 2 = only its newest part is; a score is '' where the member
--          is not in the ZSet. A member found is in the list whatever the
--          coverage; one not found is known to be absent only under
--          coverage 1.

local out = {}
local a = 1
for k = 1, #KEYS, 2 do
  local n = tonumber(ARGV[a])
  local marker = redis.call('GET', KEYS[k + 1])
  if not marker or string.sub(marker, 1, 8) == 'filling:' then
    out[#out + 1] = 0
  else
    local scores = redis.call('ZMSCORE', KEYS[k], unpack(ARGV, a + 1, a + n))
    out[#out + 1] = (marker == 'all') and 1 or 2
    for i = 1, n do
      out[#out + 1] = scores[i] or ''
    end
  end
  a = a + n + 1
end
return out
