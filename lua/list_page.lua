-- list_page.lua: read one page of a cached list, newest first — only if the
-- cache covers the whole page.
--
-- KEYS[1]  the list ZSet (member = 19-digit user id, score = follow time ms)
-- KEYS[2]  the coverage marker: 'all', '<score>:<member>' (every edge from the
--          newest down to there is cached) or 'filling:…' / absent (not cached)
-- ARGV[1]  mode: 'after'  — the `limit` edges older than the cursor (or the newest)
--                'before' — the `limit` edges newer than the cursor (or the oldest)
--                'offset' — the `limit` edges from rank `offset`, newest first
-- ARGV[2]  cursor score, or '' for none
-- ARGV[3]  cursor member, or '' for none
-- ARGV[4]  limit (>= 1)
-- ARGV[5]  offset (mode 'offset')
-- Returns  { status, more, other, member1, score1, member2, score2, … } with the
--          page newest first; status 1 = served, 0 = not cached, -1 = the page
--          reaches past what the cache covers. `more`: edges exist beyond the page
--          in the paging direction; `other`: edges exist on the other side of the cursor.

local marker = redis.call('GET', KEYS[2])
if not marker or string.sub(marker, 1, 8) == 'filling:' then
  return { 0 }
end
local bound_score, bound_member
if marker ~= 'all' then
  local sep = string.find(marker, ':', 1, true)
  bound_score = tonumber(string.sub(marker, 1, sep - 1))
  bound_member = string.sub(marker, sep + 1)
end

-- (a, am) older than (b, bm) in newest-first order (ties: larger member first)
local function older(a, am, b, bm)
  return a < b or (a == b and am < bm)
end
local function covered(score, member)
  return not bound_score or not older(score, member, bound_score, bound_member)
end

local mode = ARGV[1]
local has_cursor = ARGV[2] ~= ''
local cs = tonumber(ARGV[2])
local cm = ARGV[3]
local limit = tonumber(ARGV[4])
local want = limit + 1

-- The reply: status 1, `more` when a (limit+1)-th edge was found (dropped),
-- `other`, then the page newest first (`picked` runs in walk order).
local function reply(picked, other, newest_first)
  local more = 0
  if #picked == want then
    more = 1
    picked[#picked] = nil
  end
  local out = { 1, more, other }
  local from, to, step = 1, #picked, 1
  if not newest_first then
    from, to, step = #picked, 1, -1
  end
  for i = from, to, step do
    out[#out + 1] = picked[i][1]
    out[#out + 1] = picked[i][2]
  end
  return out
end

-- Walks the ZSet by score from `start` towards `stop` ('REV' for newest to
-- oldest), keeping the edges `accept` takes, until `want` are picked or the
-- ZSet ends. Returns nil when an edge outside the covered window is reached.
local function walk(start, stop, rev, accept)
  local picked = {}
  local offset = 0
  local chunk = want + 16
  while #picked < want do
    local rows
    if rev then
      rows = redis.call('ZRANGE', KEYS[1], start, stop, 'BYSCORE', 'REV', 'LIMIT', offset, chunk, 'WITHSCORES')
    else
      rows = redis.call('ZRANGE', KEYS[1], start, stop, 'BYSCORE', 'LIMIT', offset, chunk, 'WITHSCORES')
    end
    for i = 1, #rows, 2 do
      local m, s = rows[i], tonumber(rows[i + 1])
      if accept(s, m) then
        if not covered(s, m) then
          return nil
        end
        picked[#picked + 1] = { m, s }
        if #picked == want then
          return picked
        end
      end
    end
    if #rows < 2 * chunk then
      return picked
    end
    offset = offset + chunk
  end
  return picked
end

-- Edge at the newest (rev) or oldest end of the ZSet, as {member, score}.
local function edge_at_end(rev)
  local rows
  if rev then
    rows = redis.call('ZRANGE', KEYS[1], '+inf', '-inf', 'BYSCORE', 'REV', 'LIMIT', 0, 1, 'WITHSCORES')
  else
    rows = redis.call('ZRANGE', KEYS[1], '-inf', '+inf', 'BYSCORE', 'LIMIT', 0, 1, 'WITHSCORES')
  end
  if #rows == 2 then
    return { rows[1], tonumber(rows[2]) }
  end
  return nil
end

if mode == 'offset' then
  local offset = tonumber(ARGV[5])
  local rows = redis.call('ZRANGE', KEYS[1], offset, offset + limit, 'REV', 'WITHSCORES')
  local picked = {}
  for i = 1, #rows, 2 do
    local m, s = rows[i], tonumber(rows[i + 1])
    if not covered(s, m) then
      return { -1 }
    end
    picked[#picked + 1] = { m, s }
  end
  if #picked < want and bound_score then
    return { -1 }
  end
  local other = 0
  if offset > 0 and redis.call('ZCARD', KEYS[1]) > 0 then
    other = 1
  end
  return reply(picked, other, true)
end

if mode == 'after' then
  local max = '+inf'
  if has_cursor then
    max = ARGV[2]
  end
  local picked = walk(max, '-inf', true, function(s, m)
    return not has_cursor or older(s, m, cs, cm)
  end)
  if not picked or (#picked < want and bound_score) then
    return { -1 }
  end
  local other = 0
  if has_cursor then
    local newest = edge_at_end(true)
    if newest and not older(newest[2], newest[1], cs, cm) then
      other = 1
    end
  end
  return reply(picked, other, true)
end

-- mode 'before': walk from the cursor (or the oldest edge) towards the newest.
-- Edges between a cursor below the covered window and the window are not
-- cached, and neither is the oldest end of a partial list.
if bound_score and (not has_cursor or older(cs, cm, bound_score, bound_member)) then
  return { -1 }
end
local min = '-inf'
if has_cursor then
  min = ARGV[2]
end
local picked = walk(min, '+inf', false, function(s, m)
  return not has_cursor or older(cs, cm, s, m)
end)
if not picked then
  return { -1 }
end
local other = 0
if has_cursor then
  local oldest = edge_at_end(false)
  if bound_score or (oldest and not older(cs, cm, oldest[2], oldest[1])) then
    other = 1
  end
end
return reply(picked, other, false)
