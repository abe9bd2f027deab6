-- scangate: the facility claim. One call decides one scan, atomically:
-- its earlier decision if it has one (idempotent by scan UUID), else an echo
-- of a committed scan within +-window of its capture time, else a commit that
-- records the capture time and appends the ledger entry.
--
-- KEYS[1] scangate:{facility}:scan:<scan_uuid>     decision (string, expires)
-- KEYS[2] scangate:{facility}:seen:<content_key>   committed capture times (zset, expires)
-- KEYS[3] scangate:{facility}:ledger               ledger (stream, never expires)
-- ARGV[1] scan_uuid   ARGV[2] captured_ms   ARGV[3] window_ms   ARGV[4] retention_ms
-- ARGV[5..] ledger entry field/value pairs
-- Returns "committed" or "suppressed <twin_uuid>".
local earlier = redis.call('GET', KEYS[1])
if earlier then
  return earlier
end
local t = tonumber(ARGV[2])
local w = tonumber(ARGV[3])
local retention = tonumber(ARGV[4])
local decision
local twins = redis.call('ZRANGEBYSCORE', KEYS[2], t - w, t + w, 'LIMIT', 0, 1)
if #twins > 0 then
  decision = 'suppressed ' .. twins[1]
else
  redis.call('ZADD', KEYS[2], t, ARGV[1])
  redis.call('XADD', KEYS[3], '*', unpack(ARGV, 5))
  decision = 'committed'
end
-- Capture times older than the horizon can no longer be twins of anything
-- the gateways will still submit. The horizon is measured from the earlier of
-- this capture and the server's clock, so one gateway with a clock far in the
-- future cannot prune other gateways' recent commits.
local now = redis.call('TIME')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. (math.min(t, now_ms) - retention))
redis.call('PEXPIRE', KEYS[2], retention)
redis.call('SET', KEYS[1], decision, 'PX', retention)
return decision
