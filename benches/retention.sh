#!/bin/bash
# Bytes per read at steady state (docs/benchmarks.md, "Retention"): fill a
# state directory through `scangate bench`, archive it, let the daemon's
# sweeper remove the decided outbox rows (4 days later, libfaketime), prune
# (800 days later), fill again, printing the file size, free pages and rows
# after each step. Usage: benches/retention.sh [BINARY] [READS]
set -eu
B=${1:-target/release/scangate}
N=${2:-100000}
D=$(mktemp -d /tmp/scangate-retention.XXXX)
CFG=$D.toml
FT=$(ls /usr/lib/*/faketime/libfaketime.so.1)
printf '[gateway]\nfacility = "m"\nid = "m-gw"\nstate_dir = "%s"\n' "$D" > "$CFG"
stat1() {
    python3 - "$D/scangate.db" "$1" <<'PY'
import sqlite3, sys
c = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
pc, fl = (c.execute(f"pragma {p}").fetchone()[0] for p in ("page_count", "freelist_count"))
n = [c.execute(f"select count(*) from {t}").fetchone()[0] for t in ("scans", "ledger", "audit")]
print(f"{sys.argv[2]}: file {pc * 4096} bytes, free {fl * 4096} bytes; rows scans {n[0]} ledger {n[1]} audit {n[2]}")
if sys.argv[2].startswith("filled"):
    for name, size in c.execute("select name, sum(pgsize) from dbstat group by name order by 2 desc limit 12"):
        print(f"  {name:28} {size:12}")
PY
}
"$B" bench --scans "$N" --seconds 1 --rate 50 --dir "$D" | grep throughput
stat1 "filled with $N reads"
"$B" audit export -c "$CFG" --until "$(date -u -d '+1 min' +%FT%TZ)" --out "$D.archive" | head -1
echo "archive: $(stat -c %s "$D.archive") bytes, gzip -1: $(gzip -1 -c "$D.archive" | wc -c) bytes"
LD_PRELOAD=$FT FAKETIME=+4d FAKETIME_DONT_FAKE_MONOTONIC=1 "$B" run -c "$CFG" 2> "$D.log" &
P=$!
for _ in $(seq 1 600); do grep -q "decided outbox rows" "$D.log" && break; sleep 1; done
kill -TERM $P && wait $P || true
stat1 "after the sweeper, 4 days later"
LD_PRELOAD=$FT FAKETIME=+800d FAKETIME_DONT_FAKE_MONOTONIC=1 "$B" audit prune -c "$CFG" --archive "$D.archive" | tail -1
stat1 "after audit prune, 800 days later"
"$B" bench --scans "$N" --seconds 1 --rate 50 --dir "$D" | grep throughput
stat1 "filled again with $N reads"
echo "state directory $D (remove it when done)"
