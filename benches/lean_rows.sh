#!/bin/bash
# Bytes stored and bytes written per scan, two builds paired and
# alternated (docs/benchmarks.md, "Lean rows"). Each run: `scangate bench
# --scans N --batch B --seconds 0 --dir D` (the throughput phase and its
# checkpoint, no latency phase) on a fresh directory on disk; written =
# the run's write_bytes (getrusage ru_oublock × 512: WAL appends,
# checkpoint copies) / N; stored = the
# pages of the audit trail and the ledger with their indexes (SQLite's
# dbstat) / N — what stays once the outbox rows are swept.
# Usage: benches/lean_rows.sh OLD_BINARY NEW_BINARY [N] [PAIRS] [BATCH]
set -eu
OLD=$1
NEW=$2
N=${3:-100000}
PAIRS=${4:-3}
BATCH=${5:-1024}
WORK=$(mktemp -d /var/tmp/scangate-lean.XXXX)
one() { # label binary
    local d=$WORK/$1.$RANDOM
    mkdir -p "$d"
    python3 - "$2" "$d" "$N" "$BATCH" "$1" <<'PY'
import resource, sqlite3, subprocess, sys
b, d, n, batch, label = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_oublock
out = subprocess.run([b, "bench", "--scans", str(n), "--batch", batch, "--seconds", "0",
                      "--dir", d], check=True, capture_output=True, text=True).stdout
written = (resource.getrusage(resource.RUSAGE_CHILDREN).ru_oublock - before) * 512
c = sqlite3.connect(f"file:{d}/scangate.db?mode=ro", uri=True)
sizes = dict(c.execute("select name, sum(pgsize) from dbstat group by name"))
audit = sum(v for k, v in sizes.items() if k.startswith("audit") and k != "audit_archives")
ledger = sum(v for k, v in sizes.items() if k == "ledger" or k.startswith("ledger_")
             or k.startswith("sqlite_autoindex_ledger"))
scans = sum(v for k, v in sizes.items() if k == "scans" or k.startswith("scans_")
            or k.startswith("sqlite_autoindex_scans"))
rows = c.execute("select count(*) from audit").fetchone()[0]
thr = [l for l in out.splitlines() if "throughput" in l][:1]
print(f"{label}: written {written / n:.0f} B/scan; stored audit {audit / n:.0f} + ledger {ledger / n:.0f}"
      f" = {(audit + ledger) / n:.0f} B/scan (outbox {scans / n:.0f}); {rows} records; {thr}")
PY
    rm -rf "$d"
}
for i in $(seq 1 "$PAIRS"); do
    if [ $((i % 2)) = 1 ]; then one old "$OLD"; one new "$NEW"; else one new "$NEW"; one old "$OLD"; fi
done
rmdir "$WORK"
