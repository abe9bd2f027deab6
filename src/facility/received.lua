-- scangate: the facility's first receipt of each serialised item a call
-- names (a `receive` read's GTIN and serial), to tell a later receipt of
-- the same item (the `suspect` alert). Asked before the reads are claimed,
-- and again for the gateway's receipts when it re-publishes its commits to
-- a store that lost data; a read asked again (a retried round) finds its
-- own receipt.
--
-- KEYS[i]  scangate:{facility}:rcv:<gtin>:<serial>  (string, expires)
-- ARGV[i]  the read's receipt: "<scan_uuid> <captured_ms> <gateway> <scanner>"
-- ARGV[#KEYS + i]  how long it is kept from now (ms): what is left of
--          `[checks] serial_retention_days` from the read's capture
-- Returns, per key in order, nil when it had no receipt (the read's is
-- kept now), else the receipt it holds (the first one's, unchanged; the
-- read's own when it was kept before).
local n = #KEYS
local out = {}
for i, key in ipairs(KEYS) do
  local first = redis.call('GET', key)
  if first then
    out[i] = first
  else
    redis.call('SET', key, ARGV[i], 'PX', ARGV[n + i])
    out[i] = false
  end
end
return out
