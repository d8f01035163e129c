-- counter_record_set.lua: store a user's counter record only if it is newer.
--
-- KEYS[1]  the record: a format byte, a big-endian u32 per counter, then the
--          user_stats version as a big-endian u64 (src/cache/counters.rs)
-- ARGV[1]  the new record
-- ARGV[2]  its version (the same number as in its last 8 bytes)
-- ARGV[3]  TTL in ms
-- Returns  1 stored, 0 the stored record is as new or newer (left alone)
--
-- Records are whole snapshots tagged with the version of the row they were
-- read from, so a replayed or reordered write can never move a counter. A
-- stored record of another format (its first byte) or length is replaced:
-- its version cannot be compared, and readers take it for missing. A
-- repair that must set a record back, whatever its version, is
-- counter_record_repair.lua.

local current = redis.call('GET', KEYS[1])
local new = ARGV[1]
if current and #current == #new and string.byte(current, 1) == string.byte(new, 1) then
  local hi, lo = struct.unpack('>I4I4', string.sub(current, -8))
  local stored = hi * 4294967296 + lo
  local mine = tonumber(ARGV[2])
  if stored >= mine then
    return 0
  end
end
redis.call('SET', KEYS[1], new, 'PX', ARGV[3])
return 1
