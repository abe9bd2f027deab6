#!/bin/bash
# What keeping received serial numbers costs (docs/benchmarks.md, "A
# serial received twice"): the facility store's memory per receipt key, and
# the gateway's database bytes and prune time per receipt row, each for N
# receipts (default a million) in the forms the code writes them:
#   Redis:  SET scangate:{<facility>}:rcv:<gtin>:<serial>
#               "<scan_uuid> <captured_ms> <gateway> <scanner>" PX <ms>
#           (facility/received.lua; tests/suspect_serials.rs checks the key)
#   SQLite: a row of serials_received (migration 13) with its time index,
#           in a state directory the binary made, pruned 1,000 rows a
#           chunk as the sweeper does.
# Usage: benches/serials.sh [BINARY] [N]
set -eu
B=${1:-target/release/scangate}
N=${2:-1000000}
D=$(mktemp -d /tmp/scangate-serials.XXXX)
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
redis-server --port "$PORT" --save '' --appendonly no --daemonize yes --dir "$D" --logfile "$D/redis.log"
trap 'redis-cli -p "$PORT" shutdown nosave >/dev/null 2>&1 || true; rm -rf "$D"' EXIT
until redis-cli -p "$PORT" ping >/dev/null 2>&1; do sleep 0.1; done
used() { redis-cli -p "$PORT" info memory | awk -F: '/^used_memory:/ { print $2 }' | tr -d '\r'; }
before=$(used)
python3 - "$N" <<'PY' | redis-cli -p "$PORT" --pipe >/dev/null
import sys, uuid
n = int(sys.argv[1])
out = sys.stdout.buffer
def cmd(*args):
    b = [f"*{len(args)}\r\n".encode()]
    for a in args:
        a = a.encode()
        b.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(b)
keep = str(365 * 86_400_000)
for i in range(n):
    key = f"scangate:{{main-street-pharmacy}}:rcv:00300676382302:SN{i:010d}"
    value = f"{uuid.UUID(int=i << 64 | 0x7000_8000_0000_0000)} {1764950400000 + i} main-gw-1 receiving-1"
    out.write(cmd("SET", key, value, "PX", keep))
PY
after=$(used)
keys=$(redis-cli -p "$PORT" dbsize)
echo "redis: $keys receipt keys, used_memory $before -> $after bytes: $(( (after - before) / keys )) bytes a receipt (as many MB per million)"
# The gateway's database: one the binary made (every migration run).
"$B" bench --scans 1 --seconds 1 --rate 1 --dir "$D/state" >/dev/null
python3 - "$D/state/scangate.db" "$N" <<'PY'
import sqlite3, sys, time, uuid
db, n = sys.argv[1], int(sys.argv[2])
c = sqlite3.connect(db)
def size():
    return c.execute("select sum(pgsize) from dbstat where name in ('serials_received', 'serials_received_at', 'sqlite_autoindex_serials_received_1')").fetchone()[0] or 0
empty = size()
t = time.monotonic()
with c:
    c.executemany(
        "INSERT OR IGNORE INTO serials_received (gtin, serial, at_ms, gateway, scanner, scan_uuid) VALUES (?, ?, ?, ?, ?, ?)",
        (("00300676382302", f"SN{i:010d}", 1764950400000 + i, "main-gw-1", "receiving-1", uuid.UUID(int=i << 64 | 0x7000_8000_0000_0000).bytes) for i in range(n)),
    )
filled = size()
print(f"sqlite: {n} receipt rows in {time.monotonic() - t:.1f} s, table and indexes {filled - empty} bytes: {(filled - empty) // n} bytes a receipt")
t = time.monotonic()
removed = 0
while True:
    with c:
        k = c.execute("DELETE FROM serials_received WHERE (gtin, serial) IN (SELECT gtin, serial FROM serials_received WHERE at_ms < ?1 LIMIT 1000)", (1764950400000 + n,)).rowcount
    removed += k
    if k < 1000:
        break
print(f"sqlite: pruned {removed} rows in chunks of 1000 in {time.monotonic() - t:.1f} s")
PY
