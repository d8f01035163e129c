-- counter_record_repair.lua: set a user's counter record to the truth,
-- unless it changed since the caller read it (compare-and-set).
--
-- KEYS[1]  the record (src/cache/counters.rs)
-- ARGV[1]  the record as the caller read it before reading the truth
--          ('' when there was none)
-- ARGV[2]  the record the truth makes ('' deletes the record: the truth
--          has no counters for the user)
-- ARGV[3]  TTL in ms
-- Returns  1 written (or deleted), 0 already equal to the truth, -1 it
--          changed since it was read (left alone: the caller reads again)
--
-- Unlike counter_record_set.lua, versions are not compared: a record ahead
-- of the truth (a restored database, an event another database wrote) is
-- set back too. What the caller read before the truth guards against a
-- newer write landing in between: then the record differs from what was
-- read, and nothing is written; a write of a truth older than the one read
-- that lands afterwards is refused by counter_record_set.lua's versions.

local current = redis.call('GET', KEYS[1]) or ''
if current == ARGV[2] then
  if current ~= '' then
    redis.call('PEXPIRE', KEYS[1], ARGV[3])
  end
  return 0
end
if current ~= ARGV[1] then
  return -1
end
if ARGV[2] == '' then
  redis.call('DEL', KEYS[1])
else
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
end
return 1
