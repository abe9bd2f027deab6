#!/bin/bash
# Record the schema-7 fixture of tests/lean_rows.rs with a build of 9a2c7c8
# (see make_fixture.rs): the database as SQL, its state identity, the
# archive, and what that build's commands print about it.
# Usage: make_fixture.sh BINARY OUT (OUT as given to make_fixture.rs)
set -eu
B=$1
OUT=$2
HERE=$(cd "$(dirname "$0")" && pwd)
S=$OUT/state
printf '[gateway]\nfacility = "test-pharmacy"\nid = "test-gw"\nstate_dir = "%s"\n\n[dedup]\nwindow_ms = 3000\nretention_hours = 72\n' "$S" > "$OUT/scangate.toml"
run() { # name, then the command's arguments
    local name=$1; shift
    set +e
    "$B" "$@" --config "$OUT/scangate.toml" > "$HERE/$name.out" 2> "$OUT/$name.err"
    echo $? > "$HERE/$name.code"
    set -e
    sed -i "s|$OUT|@DIR@|g" "$HERE/$name.out"
}
run verify audit verify
run verify-archive audit verify --archive "$OUT/a.archive"
run ledger ledger export
run ledger-epcis ledger export --format epcis
python3 - "$S/scangate.db" "$HERE" <<'PY'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
assert c.execute("pragma user_version").fetchone()[0] == 7
scans = {}
for state in ("committed", "suppressed", "rejected"):
    scans[state] = c.execute(
        "select scan_uuid from scans where state = ? order by seq desc limit 1", (state,)
    ).fetchone()[0]
open(f"{sys.argv[2]}/trace-scans", "w").write("".join(f"{s} {u}\n" for s, u in scans.items()))
with open(f"{sys.argv[2]}/schema7.sql", "w") as f:
    for line in c.iterdump():
        f.write(line + "\n")
    f.write("PRAGMA user_version = 7;\n")
PY
while read -r state uuid; do run "trace-$state" audit trace "$uuid"; done < "$HERE/trace-scans"
cp "$S/state-id" "$HERE/state-id"
cp "$OUT/a.archive" "$HERE/a.archive"
