#!/usr/bin/env bash
# tests/bench/front_door.sh: fleetgate's front door under three attacks, on loopback, bounded.
#
#   make bench-front-door      (or FG_BUILD=build tests/bench/front_door.sh)
#   BENCH_SLOW_CONNS=2000 BENCH_SLOW_SECONDS=60 BENCH_FLOOD_SECONDS=10 BENCH_HUNG_SECONDS=10
#   BENCH_WORKERS=<nproc>
#
# 1. Slowloris: tests/bench/slowloris.py opens BENCH_SLOW_CONNS connections from 127.0.0.2 that
#    trickle a header line every 5 s for BENCH_SLOW_SECONDS, while (from 127.0.0.1) a health
#    checker (tests/bench/latency_probe.py: one client, back to back) GETs /healthz and wrk (4
#    connections) GETs an authenticated /v1/whoami; prints their p50/p99.
# 2. Flood of unauthenticated calls: wrk without a token on /v1/whoami for BENCH_FLOOD_SECONDS;
#    prints the calls answered and the audit lines they wrote (goal: fewer than 1,000).
# 3. Hung Redis: the redis-server is stopped (SIGSTOP) while wrk (64 connections) reads
#    /v1/projects/demo/pods and the health checker GETs /healthz; prints both latencies and
#    statuses (goals: /healthz p99 under 10 ms, reads answered 503 within a few ms), then SIGCONT.
# wrk's percentiles include wrk's own wait for a CPU on a loaded machine; the probe's do less.
# Everything runs on free ports in a temp dir and stops at the end. Not part of `make test`.
set -euo pipefail

build=${FG_BUILD:-build}
slow_conns=${BENCH_SLOW_CONNS:-2000}
slow_seconds=${BENCH_SLOW_SECONDS:-60}
flood_seconds=${BENCH_FLOOD_SECONDS:-10}
hung_seconds=${BENCH_HUNG_SECONDS:-10}
workers=${BENCH_WORKERS:-$(nproc)}
fleetgate=$build/fleetgate
here=$(dirname "$0")

for tool in wrk redis-server redis-cli openssl curl python3; do
    command -v "$tool" >/dev/null 2>&1 || { echo "front_door: $tool is missing (make deps-bench)"; exit 1; }
done
[ -x "$fleetgate" ] || { echo "front_door: $fleetgate is missing (make all)"; exit 1; }
bench=front_door
. "$here/lib.sh"
bench_tmp fg-bench-front
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

pick_port redis_port
redis-server --port "$redis_port" --bind 127.0.0.1 --dir "$tmp" --save '' --appendonly no \
    --daemonize no >"$tmp/redis.log" 2>&1 &
redis_pid=$!
pids+=($redis_pid)
conf/demo-auth.sh "$tmp/demo" >/dev/null
token=$(cat "$tmp/demo/token")
for _ in $(seq 100); do redis-cli -p "$redis_port" ping >/dev/null 2>&1 && break; sleep 0.05; done
# One synced cluster with a page of pods, as the informers would leave it.
now_ms=$(($(date +%s) * 1000))
{
    echo "HSET fg:cluster:c1 zone z1 region r1 health Healthy lastContactMs $now_ms lastError ''"
    echo "HSET fg:sync:c1:pods state Synced rv 10 objects 20 lastEventMs $now_ms lastSyncMs $now_ms"
    for i in $(seq -w 1 20); do
        echo "HSET fg:o:pod:c1:demo p-$i '{\"name\":\"p-$i\",\"project\":\"demo\",\"cluster\":\"c1\",\"zone\":\"z1\",\"phase\":\"Running\",\"version\":\"10\"}'"
        echo "ZADD fg:i:pod:c1:demo 0 p-$i"
    done
} | redis-cli -p "$redis_port" >/dev/null

pick_port fg_port
cat >"$tmp/fleetgate.json" <<EOF
{
  "listen": "127.0.0.1:$fg_port",
  "workers": $workers,
  "limits": { "max_connections": 1024 },
  "redis": { "url": "redis://127.0.0.1:$redis_port/0" },
  "log": { "level": "warn", "access_log": false },
  "openapi_file": "api/openapi.yaml",
  "docs_file": "/nonexistent/docs.html",
  "clusters": [{ "name": "c1", "zone": "z1", "url": "http://127.0.0.1:1" }],
  "cache": { "enabled": false },
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
base="http://127.0.0.1:$fg_port"
wait_http "$base/healthz"
auth="Authorization: Bearer $token"
code=$(curl -sS -o /dev/null -w '%{http_code}' -H "$auth" "$base/v1/projects/demo/pods")
[ "$code" = 200 ] || { echo "front_door: reads answer $code before the attacks"; exit 1; }

lat() { # FILE: requests, p50, p99, non-2xx
    awk '/requests in/ {n=$1} /^ +50%/ {p50=$2} /^ +99%/ {p99=$2}
         /Non-2xx or 3xx responses:/ {bad=$5} END {print n, p50, p99, bad + 0}' "$1"
}

# ---- 1. slowloris ------------------------------------------------------------
echo "front_door: slowloris of $slow_conns connections for ${slow_seconds}s; $workers workers"
python3 "$here/slowloris.py" 127.0.0.1 "$fg_port" "$slow_conns" "$slow_seconds" 127.0.0.2 \
    >"$tmp/slowloris.txt" &
slow_pid=$!
pids+=($slow_pid)
sleep 5 # the attackers are connected
measure=$((slow_seconds - 10))
python3 "$here/latency_probe.py" "$base/healthz" "$measure" >"$tmp/probe-healthz.txt" &
w1=$!
wrk -t1 -c4 -d"${measure}s" --latency -H "$auth" "$base/v1/whoami" >"$tmp/wrk-whoami.txt"
wait "$w1"
wait "$slow_pid" || true
cat "$tmp/slowloris.txt"
echo "  /healthz   during the attack: $(cat "$tmp/probe-healthz.txt")"
read -r n p50 p99 bad < <(lat "$tmp/wrk-whoami.txt")
echo "  /v1/whoami during the attack: $n calls, p50 $p50, p99 $p99, non-2xx $bad"

# ---- 2. flood of unauthenticated calls ---------------------------------------
before=$(wc -l <"$tmp/audit.log" 2>/dev/null || echo 0)
wrk -t1 -c16 -d"${flood_seconds}s" --latency "$base/v1/whoami" >"$tmp/wrk-flood.txt"
sleep 2 # the folded counts of the last interval are written
after=$(wc -l <"$tmp/audit.log")
read -r n _ _ bad < <(lat "$tmp/wrk-flood.txt")
echo "flood: $n calls without a token in ${flood_seconds}s ($bad refused), $((after - before)) audit lines"

# ---- 3. hung Redis -------------------------------------------------------------
kill -STOP "$redis_pid"
wrk -t1 -c64 -d"${hung_seconds}s" --latency -H "$auth" "$base/v1/projects/demo/pods" \
    >"$tmp/wrk-hung-reads.txt" &
w1=$!
sleep 0.5
python3 "$here/latency_probe.py" "$base/healthz" "$((hung_seconds - 1))" >"$tmp/probe-hung.txt"
wait "$w1"
kill -CONT "$redis_pid"
read -r n p50 p99 bad < <(lat "$tmp/wrk-hung-reads.txt")
echo "hung Redis: reads   $n calls, p50 $p50, p99 $p99, non-2xx $bad (503 expected)"
echo "hung Redis: /healthz $(cat "$tmp/probe-hung.txt")"
