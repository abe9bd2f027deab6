#!/bin/bash
# How long this release's first start takes to migrate a database from the
# oldest schema (1, tests/fixtures/states/schema-01-510566a), per million
# reads (figures for docs/benchmarks.md).
#
# A schema-1 database of N reads is made from the fixture's (its 9 rows
# replicated with SQL by benches/migration_state.py: new UUIDv7 per read,
# captures spread over the last 72 hours, 2/3 committed with their ledger
# entry, 2/9 echoes, 1/9 rejected, an audit record each; PRAGMA
# user_version stays 1). The synthetic reads' content keys are random, so
# `audit verify` would not accept them; that does not matter here: the
# migrations read none of it and run exactly as on a real state. It is
# cached in the work directory (made again when older than 2 hours or with
# --fresh). Each run copies it into a fresh state directory (fsynced, then
# dropped from the page cache: a cold start), starts `scangate run
# --config CFG --log-format json` with no scanners, stamps the log lines as
# they come, waits for "database migrated" and READY=1 (its own
# NOTIFY_SOCKET), sends SIGTERM, and reports: the time from the process's
# start to "migrating the database..." (page check, identity), the copy
# (scangate.db.schema-1.before-*: "migrating..." to "the database as it
# was before the migration is kept in..."), the migrations (from there to
# "database migrated"), the total the log line gives (count, copy and
# migrations), READY, the database's size before and after, and the peak
# of the state directory's allocated bytes (du, sampled every 0.5 s).
#
# Usage: benches/migration.sh [--reads N] [--runs K] [--fsync-delay-ms D[,D...]]
#          [--bin PATH] [--work DIR] [--fresh] [--warm] [--results FILE]
#   --reads N            reads in the database, the fixture's 9 included (1000000)
#   --runs K             runs of each profile (1)
#   --fsync-delay-ms D   the SD-card profile: benches/slowsync.c preloaded, each
#                        fsync/fdatasync takes at least D ms; 0 = the disk as it is.
#                        A list (0,10) alternates the profiles run after run.
#   --bin PATH           the scangate binary (default: built, release, --locked,
#                        in $CARGO_TARGET_DIR or target/)
#   --work DIR           work directory, on the disk to measure (/var/tmp/scangate-migration)
#   --warm               leave the copied database in the page cache
#   --results FILE       append each run's JSON line here (WORK/results.jsonl)
# Example: CARGO_TARGET_DIR=/work/bench-target benches/migration.sh --runs 3 --fsync-delay-ms 0,10
set -euo pipefail
cd "$(dirname "$0")/.."
READS=1000000 RUNS=1 DELAYS=0 BIN='' WORK=/var/tmp/scangate-migration FRESH='' WARM='' RESULTS=''
while [ $# -gt 0 ]; do
    case $1 in
        --reads) READS=$2; shift ;;
        --runs) RUNS=$2; shift ;;
        --fsync-delay-ms) DELAYS=$2; shift ;;
        --bin) BIN=$2; shift ;;
        --work) WORK=$2; shift ;;
        --results) RESULTS=$2; shift ;;
        --fresh) FRESH=1 ;;
        --warm) WARM=--warm ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d;s/^# \{0,1\}//'; exit 0 ;;
        *) echo "unknown option $1 (--help)" >&2; exit 2 ;;
    esac
    shift
done
TARGET=${CARGO_TARGET_DIR:-target}
if [ -z "$BIN" ]; then
    nice -n 10 cargo build --release --locked -q
    BIN=$TARGET/release/scangate
fi
SHIM=$(realpath -m "$TARGET/tmp/slowsync.so")
if [ "$DELAYS" != 0 ]; then
    mkdir -p "$(dirname "$SHIM")"
    cc -O2 -shared -fPIC -o "$SHIM" benches/slowsync.c -ldl
fi
HELPER=benches/migration_state.py
FIXTURE=tests/fixtures/states/schema-01-510566a/scangate.db
mkdir -p "$WORK/templates" "$WORK/logs"
RESULTS=${RESULTS:-$WORK/results.jsonl}
TEMPLATE=$WORK/templates/schema-1-$READS.db
if [ -n "$FRESH" ] || [ ! -f "$TEMPLATE.json" ] || [ -n "$(find "$TEMPLATE.json" -mmin +120)" ]; then
    echo "making a schema-1 database of $READS reads: $TEMPLATE" >&2
    python3 "$HELPER" make "$FIXTURE" "$TEMPLATE" --reads "$READS"
fi
echo "# $("$BIN" --version), $READS reads, $(date -u +%FT%TZ)" >&2
IFS=, read -r -a delays <<< "$DELAYS"
for r in $(seq 1 "$RUNS"); do
    for d in "${delays[@]}"; do
        label="$r/$RUNS"
        tag=$(date -u +%Y%m%dT%H%M%S)-$READS-fsync$d-run$r
        echo "run $label, fsync delay $d ms, load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
        line=$(python3 "$HELPER" run --bin "$BIN" --template "$TEMPLATE" --work "$WORK" \
            --fsync-delay-ms "$d" --shim "$SHIM" --label "$label" $WARM)
        cp "$WORK/daemon.log" "$WORK/logs/$tag.log"
        line=${line%\}}", \"loadavg\": \"$(cut -d' ' -f1-3 /proc/loadavg)\", \"saved_log\": \"$WORK/logs/$tag.log\"}"
        echo "$line" >> "$RESULTS"
        echo "$line" | python3 -c 'import json,sys; r=json.load(sys.stdin); print("  migrating line at %.1f s, copy %.1f s, migrations %.1f s, logged total %.1f s, READY at %s s, peak du %.0f MiB, rc %s" % (r["t_migrating_line_s"] or -1, r["copy_s"] or -1, r["migrations_s"] or -1, r["logged_total_s"] or -1, r["t_ready_s"], r["peak_du_bytes"]/2**20, r["rc"]))' >&2
    done
done
rm -rf "$WORK/state"
python3 "$HELPER" summary "$RESULTS"
