#!/bin/bash
# What a facility and a chain cost the facility store (docs/benchmarks.md,
# docs/chain-it.md's sizing):
# `scangate bench --gateways N` against a fresh redis-server (AOF
# everysec, as production runs it) for each N, then
# `--facilities F` across a fresh 3-primary cluster with a replica each.
# Every run starts its own servers on free ports and stops them.
# Usage: benches/scale.sh BINARY [SECONDS] [single|cluster|both]
set -eu
BIN=$1
SECS=${2:-10}
WHAT=${3:-both}
RATE=${RATE:-2}
GATEWAYS=${GATEWAYS:-"1 10 50 200"}
FACILITIES=${FACILITIES:-"1 30 300"}
REPUBLISH=${REPUBLISH:-60000}

port() { # a free port whose cluster bus port (+10000) is free too
    python3 -c '
import socket, random
while True:
    p = random.randrange(20000, 50000)
    try:
        for q in (p, p + 10000):
            s = socket.socket(); s.bind(("127.0.0.1", q)); s.close()
        print(p); break
    except OSError:
        pass'
}

server() { # dir port [args…]: a redis-server as production runs it
    local d=$1 p=$2
    shift 2
    mkdir -p "$d"
    redis-server --port "$p" --dir "$d" --save "" --appendonly yes \
        --appendfsync everysec --maxmemory-policy noeviction \
        --daemonize yes --logfile "$d/redis.log" "$@"
    until redis-cli -p "$p" ping >/dev/null 2>&1; do sleep 0.1; done
}

if [ "$WHAT" != cluster ]; then
    for n in $GATEWAYS; do
        d=$(mktemp -d /var/tmp/scangate-scale.XXXX)
        p=$(port)
        server "$d" "$p"
        echo "== one Redis, $n gateways of 1 facility"
        "$BIN" bench --gateways "$n" --facilities 1 --redis "redis://127.0.0.1:$p/" \
            --seconds "$SECS" --gateway-rate "$RATE" 2>/dev/null
        redis-cli -p "$p" shutdown nosave >/dev/null 2>&1 || true
        rm -rf "$d"
    done
fi

if [ "$WHAT" != single ]; then
    for f in $FACILITIES; do
        d=$(mktemp -d /var/tmp/scangate-cluster.XXXX)
        ports=()
        for i in 0 1 2 3 4 5; do
            p=$(port)
            server "$d/$i" "$p" --cluster-enabled yes --cluster-config-file "$d/$i/nodes.conf"
            ports+=("$p")
        done
        seeds=$(printf '127.0.0.1:%s ' "${ports[@]}")
        # shellcheck disable=SC2086
        redis-cli --cluster create $seeds --cluster-replicas 1 --cluster-yes >/dev/null
        until [ "$(redis-cli -p "${ports[0]}" cluster info | grep -c 'cluster_state:ok')" = 1 ]; do sleep 0.2; done
        # every replica attached and in sync (WAIT counts them)
        for p in "${ports[@]}"; do
            until redis-cli -p "$p" info replication | grep -q -e 'connected_slaves:1' -e 'master_link_status:up'; do sleep 0.2; done
        done
        # two gateways a facility, at most 400 (one machine runs them all)
        n=$((f * 2 > 400 ? 400 : f * 2))
        n=$((n < f ? f : n))
        echo "== cluster of 3 primaries, $f facilities, $n gateways"
        extra=()
        [ "$f" = "${FACILITIES##* }" ] && extra=(--republish "$REPUBLISH")
        "$BIN" bench --gateways "$n" --facilities "$f" \
            --cluster "$(echo "$seeds" | tr ' ' ',' | sed 's/,$//')" \
            --seconds "$SECS" --gateway-rate "$RATE" "${extra[@]}" 2>/dev/null
        for p in "${ports[@]}"; do redis-cli -p "$p" shutdown nosave >/dev/null 2>&1 || true; done
        rm -rf "$d"
    done
fi
