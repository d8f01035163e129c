-- counter_record_set.lua: store users' counter records, each only if it is
-- newer than the one stored.
--
-- KEYS     the records, one per user: a format byte, a big-endian u32 per
--          counter, then the user_stats version as a big-endian u64
--          (src/cache/counters.rs)
-- ARGV[1]  TTL in ms
-- ARGV[2..] per key, in the order of KEYS: the new record, then its version
--          (the same number as in its last 8 bytes)
-- Returns  how many records were stored (the others were as new or newer,
--          and left alone)
--
-- Records are whole snapshots tagged with the version of the row they were
-- read from, so a replayed or reordered write can never move a counter. A
-- stored record of another format (its first byte) or length is replaced:
-- its version cannot be compared, and readers take it for missing. A
-- repair that must set a record back, whatever its version, is
-- counter_record_repair.lua. One call stores many records on one Redis
-- server (a call costs Redis several times the writes in it); on Redis
-- Cluster each call stores one, whose key is in one slot.

local stored = 0
for k = 1, #KEYS do
  local new = ARGV[2 * k]
  local current = redis.call('GET', KEYS[k])
  local newer = true
  if current and #current == #new and string.byte(current, 1) == string.byte(new, 1) then
    local hi, lo = struct.unpack('>I4I4', string.sub(current, -8))
    newer = hi * 4294967296 + lo < tonumber(ARGV[2 * k + 1])
  end
  if newer then
    redis.call('SET', KEYS[k], new, 'PX', ARGV[1])
    stored = stored + 1
  end
end
return stored
