#!/usr/bin/env bash
# tests/bench/cache_sync_bench.sh (make bench-cache, or FG_BUILD=build tests/bench/cache_sync_bench.sh):
# the informers against one big cluster.
#   1. initial sync (LIST pages of BENCH_PAGE_SIZE, default 500): kubesim seeded with BENCH_PODS
#      pods (120,000) and BENCH_NODES nodes (3,000)
#      in namespace "bench"; fleetgate started on an empty Redis; seconds until every
#      fg:sync:* says Synced (BENCH_RUNS runs, median; goal <= 20 s)
#   2. memory: Redis bytes of the cached pods (MEMORY USAGE of their keys) against the raw JSON
#      of the same pods as the API lists them (goal <= 40%)
#   3. freshness: label patches at 1,000/min; time from the PATCH answer to the new label in
#      Redis (median, p99; goal p99 <= 100 ms)
#   4. lag under load: kubesim's churn at 60,000 mutations/min plus the same probe at 600/min
#      for BENCH_LOAD_S seconds (the lag must stay bounded)
# Everything runs on 127.0.0.1 with free ports and a private directory, removed at the end.
set -euo pipefail

build=${FG_BUILD:-build}
PODS=${BENCH_PODS:-120000}
NODES=${BENCH_NODES:-3000}
RUNS=${BENCH_RUNS:-3}
LOAD_S=${BENCH_LOAD_S:-20}
FRESH_N=${BENCH_FRESH_N:-300}
PAGE=${BENCH_PAGE_SIZE:-500}
TOKEN=bench-token
CLUSTER=cluster-1

dir=$(mktemp -d /tmp/fg-bench-cache-XXXXXX)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    rm -rf "$dir"
}
trap cleanup EXIT

# A random high port nothing answers on (bash's /dev/tcp; no python needed).
free_port() {
    local p
    while :; do
        p=$((20000 + RANDOM % 40000))
        (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return; }
    done
}

echo "== cache bench: $PODS pods, $NODES nodes, LIST pages of $PAGE (build $build)"
rport=$(free_port)
redis-server --port "$rport" --bind 127.0.0.1 --dir "$dir" --save '' --appendonly no \
    >"$dir/redis.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do redis-cli -p "$rport" ping >/dev/null 2>&1 && break; sleep 0.05; done

kport=$(free_port)
t0=$(date +%s.%N)
"$build/kubesim" --clusters 1 --base-port "$kport" --token "$TOKEN" --tls-dir "$dir/tls" \
    --history 1000000 --heartbeat-ms 3600000 --seed-nodes "$NODES" --seed-pods "$PODS" \
    --seed-namespace bench \
    >"$dir/kubesim.out" 2>"$dir/kubesim.err" &
pids+=($!)
for _ in $(seq 600); do grep -q "^cluster $CLUSTER" "$dir/kubesim.out" 2>/dev/null && break; sleep 0.1; done
grep -q "^cluster $CLUSTER" "$dir/kubesim.out" || { cat "$dir/kubesim.err"; echo "kubesim did not start"; exit 1; }
awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "kubesim ready and seeded in %.1f s\n", b - a }'
url="https://127.0.0.1:$kport"
ca="$dir/tls/ca.crt"
echo "$TOKEN" >"$dir/token"

fport=$(free_port)
conf/demo-auth.sh "$dir/demo" >/dev/null # a key pair and an admin token for the GET probe
cat >"$dir/fleetgate.json" <<JSON
{
  "listen": "127.0.0.1:$fport",
  "redis": { "url": "redis://127.0.0.1:$rport/0" },
  "log": { "level": "warn", "access_log": false },
  "docs_file": "/nonexistent",
  "rate_limits": { "enabled": false },
  "auth": { "issuer": "fleetgate-demo", "audience": "fleetgate", "audit_log": "$dir/audit.log",
            "keys": [ { "kid": "demo", "pem_file": "$dir/demo/jwt-public.pem", "algs": ["RS256"] } ] },
  "cache": { "lease_ms": 5000, "list_page_size": $PAGE, "replica_id": "bench" },
  "clusters": [ { "name": "$CLUSTER", "region": "r", "zone": "z", "url": "$url",
                  "token_file": "$dir/token", "ca_file": "$ca" } ]
}
JSON

probe() { "$build/bench/cache_probe" "$url" "$ca" "$dir/token" "$rport" "$CLUSTER" "$@"; }
admin() {
    curl -sS --cacert "$ca" -H "Authorization: Bearer $TOKEN" -X POST -d "$2" "$url/_kubesim/$1" >/dev/null
}

fg_pid=
start_fleetgate() {
    "$build/fleetgate" -c "$dir/fleetgate.json" >>"$dir/fleetgate.log" 2>&1 &
    fg_pid=$!
    pids+=($fg_pid)
}
stop_fleetgate() {
    kill -TERM "$fg_pid"
    wait "$fg_pid" || true
}

# 1. initial sync, BENCH_RUNS times on an empty Redis
times=()
for run in $(seq "$RUNS"); do
    redis-cli -p "$rport" flushall >/dev/null
    start_fleetgate
    s=$(probe wait-synced 300)
    times+=("$s")
    echo "initial sync run $run: $s s"
    [ "$run" -lt "$RUNS" ] && stop_fleetgate
done
median=$(printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
max=$(printf '%s\n' "${times[@]}" | sort -n | tail -1)
echo "initial sync of $PODS pods + $NODES nodes: median $median s, max $max s over $RUNS run(s) (goal <= 20 s)"
rss=$(awk '/VmHWM/ {print $2}' "/proc/$fg_pid/status" 2>/dev/null || echo "?")
echo "fleetgate peak RSS: ${rss} kB"

# 2. memory
probe memory bench | sed 's/$/ (goal <= 40%)/'
echo "redis used_memory: $(redis-cli -p "$rport" info memory | awk -F: '/^used_memory_human/ {print $2}' | tr -d '\r')"

# 3. freshness at 1,000 mutations/min: to Redis, then through fleetgate's GET (what a user sees)
probe fresh bench "$FRESH_N" 1000 | sed 's/$/ (goal p99 <= 100 ms)/'
FG_GET_URL="http://127.0.0.1:$fport" FG_GET_TOKEN_FILE="$dir/demo/admin-token" \
    probe fresh bench "$FRESH_N" 1000 | sed 's/$/ (goal p99 <= 100 ms)/'

# 4. lag at 60,000 mutations/min (kubesim's churn) with the probe beside it
admin churn '{"perMinute":60000,"namespace":"bench"}'
probe fresh bench $((LOAD_S * 10)) 600 | sed 's/^/under a 60,000\/min churn: /'
admin churn '{"perMinute":0}'
curl -s "http://127.0.0.1:$fport/metrics" | grep -E '^fleetgate_cache_(sync_lag_seconds_(count|sum)|relists_total)' || true
stop_fleetgate
echo "== cache bench done"
