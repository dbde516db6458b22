#!/usr/bin/env bash
# tests/bench/reads_bench.sh: the read APIs served from Redis (issue 5's read figures).
#
#   make bench-reads          (or FG_BUILD=build tests/bench/reads_bench.sh)
#   BENCH_SECONDS=10 BENCH_CONNECTIONS=32 BENCH_WORKERS=<nproc> BENCH_THREADS=2 BENCH_PODS=10000
#
# Everything runs on free ports in a temp dir and is stopped at the end: a private redis-server
# filled directly with BENCH_PODS simplified pods of project "demo" in one member cluster, as the
# informers write them (cache/SCHEMA.md section 2), fleetgate with the cache's informers off and
# limits high enough that no call is refused, and nginx-light with a temp config serving a static
# file of the same size as one pod's answer.
#   1. a page of 500 pods (first page and a page from the middle, through its cursor), one
#      request at a time (wrk -c1): p50 and p99. Goal: p99 <= 20 ms. Pages repeat, so after the
#      first request their pods come from the item cache (src/api/reads.c): the first read of 8
#      pages never read before is timed on its own (cold: parse and present every pod), and the
#      first page is also read with a label selector that matches every pod (filters run on the
#      cached facts).
#   2. GET of one pod under wrk -c32 against nginx serving the same bytes, in the same run:
#      req/s of each and the ratio. Goal: >= 0.6.
# Not part of `make test`.
set -euo pipefail

build=${FG_BUILD:-build}
seconds=${BENCH_SECONDS:-10}
conns=${BENCH_CONNECTIONS:-32}
threads=${BENCH_THREADS:-2}
workers=${BENCH_WORKERS:-$(nproc)}
# fleetgate's handlers block on Redis round trips (a page, a GET the mirror does not hold),
# so more threads than cores overlap them;
# nginx never blocks, so its best is one worker per core.
fg_workers=${BENCH_FG_WORKERS:-$((workers * 4))}
npods=${BENCH_PODS:-10000}
fleetgate=$build/fleetgate

for tool in wrk nginx redis-server redis-cli openssl curl; do
    command -v "$tool" >/dev/null 2>&1 || [ -x "/usr/sbin/$tool" ] ||
        { echo "reads_bench: $tool is missing (make deps)"; exit 1; }
done
[ -x "$fleetgate" ] || { echo "reads_bench: $fleetgate is missing (make all)"; exit 1; }
bench=reads_bench
. "$(dirname "$0")/lib.sh"
bench_tmp fg-bench-reads

# ---- redis, filled as the informers fill it ---------------------------------
pick_port redis_port
redis-server --port "$redis_port" --bind 127.0.0.1 --dir "$tmp" --save '' --appendonly no \
    --daemonize no >"$tmp/redis.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 100); do redis-cli -p "$redis_port" ping >/dev/null 2>&1 && break; sleep 0.05; done

fill_pods "$redis_port" "$npods"
echo "reads_bench: $(redis-cli -p "$redis_port" hlen fg:o:pod:bench-a:demo) pods in Redis," \
    "$(redis-cli -p "$redis_port" info memory | awk -F: '/^used_memory_human/ {print $2}' | tr -d '\r') used"

# ---- fleetgate -----------------------------------------------------------------
conf/demo-auth.sh "$tmp/demo" >/dev/null
token=$(cat "$tmp/demo/token")
pick_port fg_port
cat >"$tmp/fleetgate.json" <<EOF
{
  "listen": "127.0.0.1:$fg_port",
  "workers": $fg_workers,
  "limits": { "max_connections": 1024 },
  "redis": { "url": "redis://127.0.0.1:$redis_port/0" },
  "log": { "level": "warn", "access_log": false },
  "openapi_file": "api/openapi.yaml",
  "docs_file": "/nonexistent/docs.html",
  "cache": { "enabled": false },
  "clusters": [{ "name": "bench-a", "zone": "zone-a", "url": "http://127.0.0.1:9" }],
  "auth": {
    "issuer": "fleetgate-demo",
    "audience": "fleetgate",
    "keys": [{ "kid": "demo", "pem_file": "$tmp/demo/jwt-public.pem", "algs": ["RS256"] }],
    "audit_log": "$tmp/audit.log"
  },
  "rate_limits": { "read_per_minute": 60000000, "read_burst": 1000000,
                   "project_read_per_minute": 60000000, "project_read_burst": 1000000 }
}
EOF
"$fleetgate" -c "$tmp/fleetgate.json" >"$tmp/fleetgate.log" 2>&1 &
pids+=($!)
auth="Authorization: Bearer $token"
base="http://127.0.0.1:$fg_port/v1/projects/demo"
wait_http "$base/pods?limit=1" "$auth"

first="$base/pods?limit=500"
curl -fsS -H "$auth" -o "$tmp/page1.json" "$first"
items=$(grep -o '"podIP"' "$tmp/page1.json" | wc -l)
[ "$items" = 500 ] || { echo "reads_bench: the first page has $items pods, not 500"; exit 1; }
# The page after the 5,000th pod: walk 10 pages by cursor.
url=$first
for _ in $(seq 1 10); do
    cursor=$(curl -fsS -H "$auth" "$url" | grep -o '"cursor":"[A-Za-z0-9_-]*"' | cut -d'"' -f4)
    url="$base/pods?limit=500&cursor=$cursor"
done
middle=$url
filtered="$base/pods?limit=500&labelSelector=team%3Dcheckout"
# Cold pages: the 8 pages after the 10th, each read once (nothing of them in the item cache yet;
# the middle page is the first of them).
cold=()
url=$middle
for _ in $(seq 1 8); do
    curl -fsS -H "$auth" -o "$tmp/cold.json" -w '%{time_total}\n' "$url" >>"$tmp/cold.txt"
    cursor=$(grep -o '"cursor":"[A-Za-z0-9_-]*"' "$tmp/cold.json" | cut -d'"' -f4)
    url="$base/pods?limit=500&cursor=$cursor"
done
cold_ms=$(awk '{t = $1 * 1000; s += t; if (t > m) m = t} END {printf "mean %.1fms, max %.1fms", s / NR, m}' "$tmp/cold.txt")
pod=$(grep -o '"name":"app-[^"]*"' "$tmp/page1.json" | awk -F'"' 'NR == 1 {print $4}')
one="$base/pods/$pod"
curl -fsS -H "$auth" -o "$tmp/pod.json" "$one"
size=$(stat -c %s "$tmp/pod.json")

# ---- nginx: a static file of the same size -------------------------------------
start_nginx pod.json "$size" "$workers"

# ---- the runs -----------------------------------------------------------------------
run_wrk() { # NAME THREADS CONNS URL [HEADER]
    wrk -t"$2" -c"$3" -d"${seconds}s" --latency ${5:+-H "$5"} "$4" >"$tmp/wrk-$1.txt"
}
field() { # FILE: Requests/sec, 50%, 99%
    awk '/^Requests\/sec:/ {rps=$2} /^ +50%/ {p50=$2} /^ +99%/ {p99=$2} END {print rps, p50, p99}' "$1"
}
non2xx() { awk '/Non-2xx or 3xx responses:/ {print $5}' "$1"; }

echo "reads_bench: ${seconds}s each; $fg_workers fleetgate workers, $workers nginx workers;" \
    "page body $(stat -c %s "$tmp/page1.json") bytes, pod body $size bytes"
run_wrk page-first 1 1 "$first" "$auth"
run_wrk page-middle 1 1 "$middle" "$auth"
run_wrk page-filtered 1 1 "$filtered" "$auth"
run_wrk pod "$threads" "$conns" "$one" "$auth"
run_wrk nginx "$threads" "$conns" "$ng_url"

printf '%-28s %12s %10s %10s\n' "" "req/s" "p50" "p99"
echo "page of 500, first read of 8 pages never read before (cold): $cold_ms"
for r in page-first page-middle page-filtered pod nginx; do
    read -r rps p50 p99 < <(field "$tmp/wrk-$r.txt")
    label=$r
    case $r in
    page-first) label="page of 500 (first, -c1)" ;;
    page-middle) label="page of 500 (middle, -c1)" ;;
    page-filtered) label="page of 500 (filter, -c1)" ;;
    pod) label="GET one pod (-c$conns)" ;;
    nginx) label="nginx same bytes (-c$conns)" ;;
    esac
    printf '%-28s %12s %10s %10s\n' "$label" "$rps" "$p50" "$p99"
    bad=$(non2xx "$tmp/wrk-$r.txt")
    [ -z "$bad" ] || { echo "reads_bench: $r answered $bad non-2xx responses"; exit 1; }
done
read -r fg_rps _ _ < <(field "$tmp/wrk-pod.txt")
read -r ng_rps _ _ < <(field "$tmp/wrk-nginx.txt")
echo "ratio GET pod / nginx: $(awk -v a="$fg_rps" -v b="$ng_rps" 'BEGIN {printf "%.2f", a / b}')" \
    "(goal >= 0.6); page p99 goal <= 20ms"
