-- scangate: trim the facility ledger stream, never past what a consumer
-- group has not acknowledged. Atomic: a group created, read from or
-- acknowledging at the same time is seen either before or after, never
-- half, so several gateways may run it at once (it is idempotent).
--
-- The safe point of a group is its first pending entry (delivered, not
-- acknowledged) or, with none pending, the entry after its last-delivered
-- id: everything before it was delivered to the group and acknowledged.
-- The stream is trimmed (XTRIM MINID, exact) to the earliest safe point of
-- all groups, and never to anything newer than the server's clock less the
-- horizon (stream ids are the server's ms). Without any group nothing is
-- trimmed: nobody has read it.
--
-- KEYS[1] scangate:{facility}:ledger
-- ARGV[1] the horizon in ms (entries at least this old may go)
-- Returns {trimmed, length, now_ms, groups, then per group: name, pending,
-- oldest unacknowledged entry id ('' if every entry is acknowledged)}.
local key = KEYS[1]
local keep = tonumber(ARGV[1])
local now = redis.call('TIME')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
if redis.call('EXISTS', key) == 0 then
  return {0, 0, now_ms, 0}
end
local function parse(id)
  local ms, seq = string.match(id, '^(%d+)-(%d+)$')
  return {tonumber(ms), tonumber(seq)}
end
local function before(a, b)
  return a[1] < b[1] or (a[1] == b[1] and a[2] < b[2])
end
-- The horizon: nothing appended later than this goes (an entry of the
-- horizon's own ms may: with keep 0, everything acknowledged goes).
local point = {now_ms - keep + 1, 0}
local out = {}
local groups = redis.call('XINFO', 'GROUPS', key)
for _, g in ipairs(groups) do
  local info = {}
  for j = 1, #g, 2 do
    info[g[j]] = g[j + 1]
  end
  local name = info['name']
  local pending = tonumber(info['pending'])
  local safe
  if pending > 0 then
    safe = parse(redis.call('XPENDING', key, name)[2])
  else
    safe = parse(info['last-delivered-id'])
    safe[2] = safe[2] + 1
  end
  if before(safe, point) then
    point = safe
  end
  local first = redis.call('XRANGE', key, safe[1] .. '-' .. safe[2], '+', 'COUNT', 1)[1]
  out[#out + 1] = name
  out[#out + 1] = pending
  out[#out + 1] = first and first[1] or ''
end
local trimmed = 0
if #groups > 0 and point[1] > 0 then
  trimmed = redis.call('XTRIM', key, 'MINID', '=', point[1] .. '-' .. point[2])
end
local head = {trimmed, redis.call('XLEN', key), now_ms, #groups}
for _, v in ipairs(out) do
  head[#head + 1] = v
end
return head
