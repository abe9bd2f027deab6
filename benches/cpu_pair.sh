#!/bin/bash
# Gateway CPU per scan, two builds paired and alternated
# (docs/benchmarks.md).
# Embedded: user + sys of `scangate bench --scans N --seconds 0` / N.
# With --redis: the bench's own "CPU per scan" line (gateway and Redis),
# each run against a fresh redis-server on a free port (AOF everysec).
# Usage: benches/cpu_pair.sh OLD_BINARY NEW_BINARY [PAIRS] [--redis]
set -eu
OLD=$1
NEW=$2
PAIRS=${3:-4}
MODE=${4:-}
one() { # binary
    local d
    d=$(mktemp -d /var/tmp/scangate-cpu.XXXX)
    if [ "$MODE" = --redis ]; then
        local n=100000 port=$((21000 + RANDOM % 20000))
        redis-server --port $port --dir "$d" --save "" --appendonly yes \
            --appendfsync everysec --daemonize yes --logfile "$d/redis.log"
        until redis-cli -p $port ping >/dev/null 2>&1; do sleep 0.1; done
        "$1" bench --redis "redis://127.0.0.1:$port/" --scans $n --seconds 0 --dir "$d/s" >"$d/out" 2>&1
        redis-cli -p $port shutdown nosave >/dev/null 2>&1 || true
        echo "$(basename "$1") $(grep -o '= [0-9]* decisions/s' "$d/out") $(grep 'CPU per scan' "$d/out")"
    else
        local n=200000
        /usr/bin/time -o "$d/time" -f "%U %S" "$1" bench --scans $n --seconds 0 --dir "$d/s" >"$d/out" 2>&1
        read -r user sys <"$d/time"
        python3 -c "print('$(basename "$1")', 'CPU per scan %.2f us' % (($user + $sys) * 1e6 / $n))"
    fi
    rm -rf "$d"
}
for i in $(seq 1 "$PAIRS"); do
    if [ $((i % 2)) = 1 ]; then one "$OLD"; one "$NEW"; else one "$NEW"; one "$OLD"; fi
done
