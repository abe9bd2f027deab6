-- scangate: the facility claim. One call decides a batch of scans, in the
-- order given (capture order); each scan's decision is atomic with its
-- ledger append, and so is the whole batch. For each scan: its earlier
-- decision if it has one (idempotent by scan UUID: a retried call after a
-- lost reply returns the same decisions), else an echo of a committed scan
-- within +-window of its capture time, else a commit that records the
-- capture time and appends the ledger entry. The twin an echo names is the
-- committed capture nearest to it in time (of two equally near, the
-- earlier), as the embedded gate's ledger lookup names it.
--
-- A retried commit is recognised by its decision key, and failing that by
-- its own member of the seen set (ZSCORE): never by the window check, which
-- could name another scan (one the facility's window, since changed, let
-- commit beside it) or the scan itself (a decision key that expired before
-- its member).
--
-- KEYS[2i-1] scangate:{facility}:scan:<scan_uuid>     decision (string, expires)
-- KEYS[2i]   scangate:{facility}:seen:<content_key>   committed capture times (zset, expires)
-- KEYS[#KEYS-1-m .. #KEYS-2] scangate:{facility}:scan:<marker_uuid>, one per
--                marker (below), in the order ARGV[4] names them
-- KEYS[#KEYS-1] scangate:{facility}:settings          window_ms, retention_ms (hash, expires)
-- KEYS[#KEYS] scangate:{facility}:ledger              ledger (stream, never expires)
-- ARGV[1] window_ms   ARGV[2] retention_ms   ARGV[3] n (ledger fields per entry)
-- ARGV[4] the markers, m scan UUIDs separated by spaces ('' for none): the
--         caller's latest commits it has recorded (its ledger's and each of
--         its claimer lanes')
-- ARGV[5] the round's token, returned first (the caller's check that the
--         reply is this round's, not one an earlier failed round left owed)
-- ARGV[6 .. 5+n] the ledger field names (the same for every scan of the call)
-- then per scan: scan_uuid, captured_ms, its own window_ms (ARGV[1] for
--         most; narrower for a double-fire window or a declared repeat,
--         never wider), followed by its n field values
-- Returns the token, then one "committed" or "suppressed <twin_uuid>
-- <twin_captured_ms>" per scan ("=" in front when the scan was decided by an
-- earlier call; the time left out when the twin is no longer in the seen
-- set), or, with
-- nothing changed, the error "SCANGATE_SETTINGS <window_ms> <retention_ms>"
-- (- for a field not set) when the facility already runs with other
-- settings than the caller's, or "SCANGATE_LOST <marker_uuid>" when a
-- marker's decision is not here: the store lost data the caller relies on
-- (emptied, replaced, a lagging replica promoted, an old backup restored),
-- and the caller must re-publish its commits before it claims new scans.
--
-- Cost: what Redis spends on a claim is mostly the redis.call machinery,
-- so the script makes as few calls as the decisions allow: one EXISTS for
-- every marker and one for every decision key of the call (a retry is
-- rare), the seen set's ZSCORE only when the set is not empty, each seen
-- set's PEXPIRE once per call, and command arguments as the strings the
-- caller sent (a Lua number is formatted again at every call).
local w = tonumber(ARGV[1])
local retention = tonumber(ARGV[2])
local n = tonumber(ARGV[3])
local token = ARGV[5]
local settings = KEYS[#KEYS - 1]
local ledger = KEYS[#KEYS]
-- Replication and snapshots keep a prefix of the history, so if the newest
-- commit of each of the caller's lanes is here, so are all their earlier ones.
local markers = {}
for uuid in string.gmatch(ARGV[4], '%S+') do
  markers[#markers + 1] = uuid
end
local m = #markers
local claims = (#KEYS - 2 - m) / 2
if m > 0 then
  local marker_keys = {}
  for k = 1, m do
    marker_keys[k] = KEYS[2 * claims + k]
  end
  -- EXISTS counts a key named twice twice: all are here iff it counts m.
  if redis.call('EXISTS', unpack(marker_keys)) < m then
    for k, uuid in ipairs(markers) do
      if not redis.call('GET', marker_keys[k]) then
        return redis.error_reply('SCANGATE_LOST ' .. uuid)
      end
    end
  end
end
-- One window and one retention for the whole facility: a scan must be judged
-- the same whichever gateway reads it, and a gateway with a shorter retention
-- would prune capture times another gateway still judges against. The first
-- gateway to claim sets them; they live as long as decisions keep being made.
local agreed = redis.call('HMGET', settings, 'window_ms', 'retention_ms')
if (agreed[1] or agreed[2]) and (agreed[1] ~= ARGV[1] or agreed[2] ~= ARGV[2]) then
  return redis.error_reply('SCANGATE_SETTINGS ' .. (agreed[1] or '-') .. ' ' .. (agreed[2] or '-'))
end
-- Whether any scan of the call has a decision key already (a retry after a
-- lost reply): if none has, each scan's is the one this call sets, if any
-- (kept in `made`; a UUID named twice in a call finds its first decision),
-- and no GET is needed.
local retried = false
if claims > 0 then
  local scan_keys = {}
  for i = 1, claims do
    scan_keys[i] = KEYS[2 * i - 1]
  end
  retried = redis.call('EXISTS', unpack(scan_keys)) > 0
end
local made = {}
-- Whether this call decided anything (wrote): a call that only returns
-- earlier decisions writes nothing, so it is still answered by a full server
-- or a read-only replica, as it was before the settings existed.
local wrote = false
-- The seen sets this call committed to, in order, each once: their
-- PEXPIRE comes after the call's claims.
local touched = {}
local expiring = {}
-- Capture times older than the horizon can no longer be twins of anything
-- the gateways will still submit. The horizon is measured from the earlier of
-- a capture and the server's clock, so one gateway with a clock far in the
-- future cannot prune other gateways' recent commits.
local now = redis.call('TIME')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
-- The XADD arguments: names once, each entry's values written over them.
local entry = {ledger, '*'}
for j = 1, n do
  entry[1 + 2 * j] = ARGV[5 + j]
end
local out = {token}
local last = #ARGV
local a = 6 + n
local i = 1
while a <= last do
  local uuid = ARGV[a]
  local captured = ARGV[a + 1]
  local t = tonumber(captured)
  -- (Most scans are judged by the facility's window: the same string,
  -- which Lua compares without converting.)
  local wi = w
  if ARGV[a + 2] ~= ARGV[1] then
    wi = math.min(tonumber(ARGV[a + 2]), w)
  end
  local first = a + 3
  a = first + n
  local scan_key = KEYS[2 * i - 1]
  local seen_key = KEYS[2 * i]
  i = i + 1
  local decision
  if retried then
    decision = redis.call('GET', scan_key)
  else
    decision = made[scan_key]
  end
  -- The two earliest committed capture times: for a new label (most
  -- scans) they answer alone, and the first says whether pruning is due.
  -- An empty set holds no member of the scan's either.
  local oldest = nil
  if not decision then
    oldest = redis.call('ZRANGE', seen_key, '0', '1', 'WITHSCORES')
    if #oldest > 0 and (oldest[1] == uuid or redis.call('ZSCORE', seen_key, uuid)) then
      decision = 'committed' -- its own earlier commit, found by identity
    end
  end
  -- An earlier decision is answered with '=' in front: it was made by an
  -- earlier call (a retry after a lost reply), whose place in the store's
  -- history it has, and its key expires as that call set it.
  local again = decision
  -- What the reply adds to an echo: its twin's capture time, so the caller
  -- can tell another gateway's copy of the same read from a later read.
  local twin_ms = nil
  if not decision then
    local twin = nil
    local o = nil
    if #oldest > 0 then
      o = tonumber(oldest[2])
      -- The nearest commit within the window (of two equally near, the
      -- earlier). The two earliest answer most scans alone: the earliest
      -- is the nearest when it is later than the capture, or when no
      -- other commit is inside the window; else the window's commits (a
      -- label has few within one) are read and the nearest taken here.
      local next_ms = oldest[4] and tonumber(oldest[4])
      if o > t or (o >= t - wi and (not next_ms or next_ms > t + wi)) then
        if o >= t - wi and o <= t + wi then
          twin, twin_ms = oldest[1], oldest[2]
        end
      elseif next_ms and next_ms <= t + wi then
        local near = redis.call('ZRANGEBYSCORE', seen_key, t - wi, t + wi, 'WITHSCORES')
        local best = nil
        for k = 1, #near, 2 do
          local d = math.abs(tonumber(near[k + 1]) - t)
          if not best or d < best then
            best, twin, twin_ms = d, near[k], near[k + 1]
          end
        end
      end
    end
    if twin then
      decision = 'suppressed ' .. twin
    else
      redis.call('ZADD', seen_key, captured, uuid)
      for j = 1, n do
        entry[2 + 2 * j] = ARGV[first + j - 1]
      end
      redis.call('XADD', unpack(entry))
      local horizon = math.min(t, now_ms) - retention
      if o and o < horizon then
        redis.call('ZREMRANGEBYSCORE', seen_key, '-inf', '(' .. horizon)
      end
      if not expiring[seen_key] then
        expiring[seen_key] = true
        touched[#touched + 1] = seen_key
      end
      decision = 'committed'
    end
    -- Every decision keeps its key for this gateway's retention: the seen
    -- set alone would not do, since another gateway's shorter retention
    -- could prune or expire it first. (The key holds the twin alone, as
    -- it did before the reply said its time.)
    redis.call('SET', scan_key, decision, 'PX', ARGV[2])
    made[scan_key] = decision
    wrote = true
  elseif string.sub(decision, 1, 11) == 'suppressed ' then
    -- An earlier decision's twin, if the seen set still has it.
    twin_ms = redis.call('ZSCORE', seen_key, string.sub(decision, 12))
    if not twin_ms then
      twin_ms = nil
    end
  end
  local said = decision
  if twin_ms then
    said = decision .. ' ' .. twin_ms
  end
  if again then
    out[#out + 1] = '=' .. said
  else
    out[#out + 1] = said
  end
end
-- Last: Redis refuses a script's first write when it is out of memory, and
-- only that one, so a write that is always allowed (PEXPIRE) must not come
-- before a claim's, or a full server would take claims past its maxmemory.
if wrote then
  for _, key in ipairs(touched) do
    redis.call('PEXPIRE', key, ARGV[2])
  end
  if not agreed[1] then
    redis.call('HSET', settings, 'window_ms', ARGV[1], 'retention_ms', ARGV[2])
  end
  redis.call('PEXPIRE', settings, ARGV[2])
end
return out
