-- list_members.lua: which of some users a cached list holds, with their
-- scores — the answer to "does the list's owner follow them" without a trip
-- to PostgreSQL.
--
-- KEYS[1]  the list ZSet (member = 19-digit user id, score = follow time ms)
-- KEYS[2]  the coverage marker (see list_page.lua)
-- ARGV     members to look up (at least one)
-- Returns  { coverage, score1, score2, … }: coverage 0 = not cached (nothing
--          else returned), 1 = the whole list is cached, 2 = only its newest
--          part is; a score is '' where the member is not in the ZSet. A member
--          found is in the list whatever the coverage; one not found is known
--          to be absent only under coverage 1.

local marker = redis.call('GET', KEYS[2])
if not marker or string.sub(marker, 1, 8) == 'filling:' then
  return { 0 }
end
local scores = redis.call('ZMSCORE', KEYS[1], unpack(ARGV))
local out = { 2 }
if marker == 'all' then
  out[1] = 1
end
for i = 1, #ARGV do
  out[i + 1] = scores[i] or ''
end
return out
