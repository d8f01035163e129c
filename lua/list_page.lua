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
local picked = {}
local chunk = want + 16

if mode == 'offset' then
  local offset = tonumber(ARGV[5])
  local rows = redis.call('ZRANGE', KEYS[1], offset, offset + limit, 'REV', 'WITHSCORES')
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
  local more = 0
  if #picked == want then
    more = 1
    picked[#picked] = nil
  end
  local out = { 1, more, other }
  for _, p in ipairs(picked) do
    out[#out + 1] = p[1]
    out[#out + 1] = p[2]
  end
  return out
end

if mode == 'after' then
  local max = '+inf'
  if has_cursor then
    max = ARGV[2]
  end
  local start = 0
  local exhausted = false
  while #picked < want and not exhausted do
    local rows = redis.call('ZRANGE', KEYS[1], max, '-inf', 'BYSCORE', 'REV', 'LIMIT', start, chunk, 'WITHSCORES')
    if #rows < 2 * chunk then
      exhausted = true
    end
    for i = 1, #rows, 2 do
      local m, s = rows[i], tonumber(rows[i + 1])
      if not has_cursor or older(s, m, cs, cm) then
        if not covered(s, m) then
          return { -1 }
        end
        picked[#picked + 1] = { m, s }
        if #picked == want then
          break
        end
      end
    end
    start = start + chunk
  end
  if #picked < want and bound_score then
    return { -1 }
  end
  local other = 0
  if has_cursor then
    local newest = redis.call('ZRANGE', KEYS[1], '+inf', '-inf', 'BYSCORE', 'REV', 'LIMIT', 0, 1, 'WITHSCORES')
    if #newest == 2 and not older(tonumber(newest[2]), newest[1], cs, cm) then
      other = 1
    end
  end
  local more = 0
  if #picked == want then
    more = 1
    picked[#picked] = nil
  end
  local out = { 1, more, other }
  for _, p in ipairs(picked) do
    out[#out + 1] = p[1]
    out[#out + 1] = p[2]
  end
  return out
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
local start = 0
local exhausted = false
while #picked < want and not exhausted do
  local rows = redis.call('ZRANGE', KEYS[1], min, '+inf', 'BYSCORE', 'LIMIT', start, chunk, 'WITHSCORES')
  if #rows < 2 * chunk then
    exhausted = true
  end
  for i = 1, #rows, 2 do
    local m, s = rows[i], tonumber(rows[i + 1])
    if not has_cursor or older(cs, cm, s, m) then
      if not covered(s, m) then
        return { -1 }
      end
      picked[#picked + 1] = { m, s }
      if #picked == want then
        break
      end
    end
  end
  start = start + chunk
end
local other = 0
if has_cursor then
  if bound_score then
    other = 1
  else
    local oldest = redis.call('ZRANGE', KEYS[1], '-inf', '+inf', 'BYSCORE', 'LIMIT', 0, 1, 'WITHSCORES')
    if #oldest == 2 and not older(cs, cm, tonumber(oldest[2]), oldest[1]) then
      other = 1
    end
  end
end
local more = 0
if #picked == want then
  more = 1
  picked[#picked] = nil
end
-- picked runs oldest to newest: return it newest first
local out = { 1, more, other }
for i = #picked, 1, -1 do
  out[#out + 1] = picked[i][1]
  out[#out + 1] = picked[i][2]
end
return out
