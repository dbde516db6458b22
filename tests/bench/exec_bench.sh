#!/usr/bin/env bash
# tests/bench/exec_bench.sh [ROUND_TRIPS] (not in `make test`; `make bench-exec`): the exec
# round trip, one stdin byte to its echo on stdout (`cat` in the container, WebSocket v5), through
# fleetgate against straight to kubesim, measured in the same run: p50/p99 and their ratios,
# RUNS (default 3) times. kubesim (one cluster, one pod), a private redis-server, fleetgate with
# its informers; the client is Debian's python3-websocket (tests/bench/exec_rtt.py).
set -euo pipefail
bench=exec_bench
FG_BUILD=${FG_BUILD:-build}
N=${1:-500}
RUNS=${RUNS:-3}
cd "$(dirname "$0")/../.."
. tests/bench/lib.sh
bench_tmp fg-exec-bench
pick_port redis_port; pick_port ks_port; pick_port fg_port

redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no --dir "$tmp" \
    >"$tmp/redis.log" 2>&1 & pids+=($!)
"$FG_BUILD/kubesim" --clusters 1 --base-port "$ks_port" --token ks-token --tls-dir "$tmp/tls" \
    --pod-start-ms 0 >"$tmp/kubesim.out" 2>"$tmp/kubesim.log" & pids+=($!)
for _ in $(seq 1 100); do grep -q '^cluster' "$tmp/kubesim.out" 2>/dev/null && break; sleep 0.05; done
ks="https://127.0.0.1:$ks_port"
kc() { curl -fsS --cacert "$tmp/tls/ca.crt" -H "Authorization: Bearer ks-token" -H 'Content-Type: application/json' "$@"; }
kc -X POST "$ks/api/v1/namespaces" -d '{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"demo"}}' >/dev/null
kc -X POST "$ks/api/v1/namespaces/demo/pods" -d '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web-0"},"spec":{"containers":[{"name":"c","image":"nginx:1"}]}}' >/dev/null
echo ks-token >"$tmp/ks-token"

conf/demo-auth.sh "$tmp/auth" >/dev/null
token=$(cat "$tmp/auth/admin-token")
cat >"$tmp/fleetgate.json" <<JSON
{"listen": "127.0.0.1:$fg_port", "workers": 4,
 "redis": {"url": "redis://127.0.0.1:$redis_port/0"},
 "log": {"level": "warn", "access_log": false},
 "openapi_file": "api/openapi.yaml", "docs_file": "/nonexistent",
 "clusters": [{"name": "east-a", "region": "r", "zone": "z", "url": "$ks",
               "token_file": "$tmp/ks-token", "ca_file": "$tmp/tls/ca.crt"}],
 "auth": {"issuer": "fleetgate-demo", "audience": "fleetgate",
          "keys": [{"kid": "demo", "pem_file": "$tmp/auth/jwt-public.pem", "algs": ["RS256"]}],
          "audit_log": "$tmp/audit.log"}}
JSON
"$FG_BUILD/fleetgate" -c "$tmp/fleetgate.json" 2>"$tmp/fleetgate.log" & pids+=($!)
wait_http "http://127.0.0.1:$fg_port/healthz"
for _ in $(seq 1 200); do
    curl -fsS -o /dev/null -H "Authorization: Bearer $token" "http://127.0.0.1:$fg_port/v1/projects/demo/pods/web-0" 2>/dev/null && break
    sleep 0.05
done
sleep 0.5 # kubesim's kubelet starts the pod

for r in $(seq 1 "$RUNS"); do
    direct=$(/usr/bin/python3 tests/bench/exec_rtt.py "wss://127.0.0.1:$ks_port/api/v1/namespaces/demo/pods/web-0/exec" \
        ks-token "$tmp/tls/ca.crt" "$N")
    gate=$(/usr/bin/python3 tests/bench/exec_rtt.py "ws://127.0.0.1:$fg_port/v1/projects/demo/pods/web-0/exec" \
        "$token" - "$N")
    /usr/bin/python3 - "$r" "$direct" "$gate" <<'PY'
import json, sys
d, g = json.loads(sys.argv[2]), json.loads(sys.argv[3])
print("exec_bench: run %s: round trip p50 %.3f ms (direct %.3f, ratio %.2f), p99 %.3f ms (direct %.3f, ratio %.2f), %d round trips"
      % (sys.argv[1], g["p50_ms"], d["p50_ms"], g["p50_ms"] / d["p50_ms"], g["p99_ms"], d["p99_ms"],
         g["p99_ms"] / d["p99_ms"], g["round_trips"]))
PY
done
