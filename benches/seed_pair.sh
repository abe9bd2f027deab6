#!/bin/bash
# scangate against the seeds' own gate (../shared/bench/seed_gate.py: SET NX
# PX per scan, no durability), in the same run on one Redis per round
# (docs/benchmarks.md, "Against the seeds' gate"). Each round starts a fresh
# redis-server (AOF everysec, a free port) and runs the three in an order
# that rotates from round to round: the seed gate (100,000 decisions:
# 20,000 picks with 4 echoes each), scangate embedded (`bench --scans
# 200000 --seconds 1`) and scangate through that Redis (`bench --redis …
# --scans 100000 --seconds 1`); it prints each one's decisions/s and the
# two ratios.
# Usage: benches/seed_pair.sh BINARY [ROUNDS] [SEED_GATE]
set -eu
BIN=$1
ROUNDS=${2:-3}
SEED=${3:-$(dirname "$0")/../../shared/bench/seed_gate.py}
python3 -c 'import redis' 2>/dev/null || {
    echo "seed_gate.py needs redis-py: pip install redis" >&2
    exit 1
}

for r in $(seq 1 "$ROUNDS"); do
    d=$(mktemp -d /var/tmp/scangate-seed.XXXX)
    port=$((21000 + RANDOM % 20000))
    redis-server --port $port --dir "$d" --save "" --appendonly yes \
        --appendfsync everysec --daemonize yes --logfile "$d/redis.log"
    until redis-cli -p $port ping >/dev/null 2>&1; do sleep 0.1; done
    seed= emb= red=
    run_seed() { seed=$(python3 "$SEED" "redis://127.0.0.1:$port/0" 20000 4 | awk '{print $2}'); }
    run_emb() {
        emb=$("$BIN" bench --scans 200000 --seconds 1 --dir "$d/e" 2>/dev/null |
            sed -n 's/.*= \([0-9]*\) decisions\/s.*/\1/p')
    }
    run_red() {
        red=$("$BIN" bench --redis "redis://127.0.0.1:$port/1" --scans 100000 --seconds 1 --dir "$d/r" 2>/dev/null |
            sed -n 's/^throughput: .*= \([0-9]*\) decisions\/s.*/\1/p')
    }
    case $((r % 3)) in
        1) run_seed; run_emb; run_red ;;
        2) run_emb; run_red; run_seed ;;
        0) run_red; run_seed; run_emb ;;
    esac
    redis-cli -p $port shutdown nosave >/dev/null 2>&1 || true
    rm -rf "$d"
    python3 -c "
s, e, r = $seed, $emb, $red
print(f'round $r: seed gate {s}/s, scangate embedded {e}/s ({e/s:.1f}x), via Redis {r}/s ({r/s:.1f}x)')"
done
