#!/usr/bin/env bash
# tests/bench/stream_bench.sh [STREAMS] [SECONDS]: follow streams of pod logs through fleetgate
# (not in `make test`; `make bench-stream`). kubesim (one cluster, 10 pods writing
# LINES_PER_S lines a second each), a private redis-server, fleetgate with its informers; then
#   1. the reference, measured in the same run: REF_STREAMS (default 10) follows read straight
#      from kubesim (TLS, a thread each), once alone and once alongside step 2's streams, once
#      they are all open (so kubesim carries the same load for both);
#   2. STREAMS (default 1000) follows through fleetgate, held SECONDS (default 15) from when
#      every one has its answer's head (the opens and TLS handshakes are not in the figures):
#      fleetgate's RSS per stream (VmRSS once they are open, minus before), and the latency of
#      each line (arrival minus kubesim's timestamp of the line) against the reference alongside:
#      p50/p99 and their ratios;
#   3. the p99 of GET /v1/projects/demo/pods/web-1 (curl, 200 calls) with no streams and while
#      the streams are open;
#      and, as the like-with-like reference for the machine's load, while the same STREAMS
#      follows read kubesim straight (kubesim's writers and a client reading STREAMS sockets
#      load the two cores as in step 2, but fleetgate carries none of it);
#   4. fleetgate's CPU time (user + system, from /proc) per line relayed while the streams are
#      held: unlike the latencies, other processes on a loaded machine do not inflate it.
# The follows through fleetgate speak HTTP/1.1 (chunked, as kubectl and curl get them);
# STREAM_HTTP=1.0 makes them HTTP/1.0 as before 2026-11-24 (libmicrohttpd's resume path).
# The whole is run RUNS times (default 3), each from scratch; a last table gives each figure's
# median and spread (min-max) over the runs, the GET's p99 as the ratio with the streams open
# over idle. The hard case is kept: kubesim dates every pod's lines from the same whole second,
# so all the streams' lines are due at once (a burst of STREAMS lines LINES_PER_S times a
# second), not spread as real logs would be.
# Ports are picked in 25000-25999 (servers started by hand stay in that range).
set -euo pipefail
bench=stream_bench
FG_BUILD=${FG_BUILD:-build}
STREAMS=${1:-1000}
SECONDS_HELD=${2:-15}
LINES_PER_S=${LINES_PER_S:-2}
REF_STREAMS=${REF_STREAMS:-10}
RUNS=${RUNS:-3}
cd "$(dirname "$0")/../.."
if [ -z "${STREAM_BENCH_ONE:-}" ]; then
    results=$(mktemp /tmp/fg-stream-bench-runs-XXXXXX)
    trap 'rm -f "$results"' EXIT
    for run in $(seq 1 "$RUNS"); do
        echo "$bench: run $run of $RUNS"
        STREAM_BENCH_ONE=1 "$0" "$STREAMS" "$SECONDS_HELD" | tee /dev/stderr |
            sed -n 's/^stream_bench_json: //p' >>"$results"
    done 2>&1
    /usr/bin/python3 - "$results" "$STREAMS" <<'PY'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
rows = [("RSS per follow stream (KiB)", "rss_kb"),
        ("line latency p50 through fleetgate (ms)", "p50"), ("line latency p50 direct alongside (ms)", "d50"),
        ("line latency p50 ratio", "r50"),
        ("line latency p99 through fleetgate (ms)", "p99"), ("line latency p99 direct alongside (ms)", "d99"),
        ("line latency p99 ratio", "r99"),
        ("GET of a pod p99, idle (ms)", "get_idle"), ("GET of a pod p99, streams open (ms)", "get_busy"),
        ("GET of a pod p99 ratio, streams open / idle", "get_ratio"),
        ("GET of a pod p99, streams straight to kubesim (ms)", "get_ref"),
        ("GET of a pod p99 ratio, through fleetgate / straight", "get_vs_ref"),
        ("fleetgate CPU per line relayed (us)", "cpu_us")]
print("stream_bench: summary of %d runs, %s follows (synchronized kubesim bursts): median (min-max)"
      % (len(runs), sys.argv[2]))
for name, k in rows:
    xs = [r[k] for r in runs if r.get(k) is not None]
    if xs:
        print("stream_bench:   %-46s %8.2f  (%.2f-%.2f)  runs: %s"
              % (name, statistics.median(xs), min(xs), max(xs), " ".join("%.2f" % x for x in xs)))
PY
    exit 0
fi
. tests/bench/lib.sh
bench_tmp fg-stream-bench
ulimit -n "$(ulimit -Hn)"

port25() { # VAR: a free port in 25000-25999
    local p
    while :; do
        p=$((25000 + RANDOM % 1000))
        case "$used_ports" in *" $p "*) continue ;; esac
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
            used_ports="$used_ports$p "
            printf -v "$1" '%s' "$p"
            return
        fi
    done
}
port25 redis_port; port25 ks_port; port25 fg_port

redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no --dir "$tmp" \
    >"$tmp/redis.log" 2>&1 & pids+=($!)
"$FG_BUILD/kubesim" --clusters 1 --base-port "$ks_port" --token ks-token --tls-dir "$tmp/tls" \
    --pod-start-ms 0 --log-lines-per-second "$LINES_PER_S" >"$tmp/kubesim.out" 2>"$tmp/kubesim.log" &
pids+=($!)
for _ in $(seq 1 100); do grep -q '^cluster' "$tmp/kubesim.out" 2>/dev/null && break; sleep 0.05; done
ks="https://127.0.0.1:$ks_port"
kc() { curl -fsS --cacert "$tmp/tls/ca.crt" -H "Authorization: Bearer ks-token" -H 'Content-Type: application/json' "$@"; }
kc -X POST "$ks/api/v1/namespaces" -d '{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"demo"}}' >/dev/null
for i in $(seq 0 9); do
    kc -X POST "$ks/api/v1/namespaces/demo/pods" -d "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"web-$i\",\"labels\":{\"app\":\"web\"}},\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"nginx:1\"}]}}" >/dev/null
done
echo ks-token >"$tmp/ks-token"

conf/demo-auth.sh "$tmp/auth" >/dev/null
token=$(cat "$tmp/auth/token")
cat >"$tmp/fleetgate.json" <<JSON
{"listen": "127.0.0.1:$fg_port", "workers": 4,
 "limits": {"max_connections": $((STREAMS + 200)), "max_connections_per_client": $((STREAMS + 200))},
 "redis": {"url": "redis://127.0.0.1:$redis_port/0"},
 "log": {"level": "warn", "access_log": false},
 "openapi_file": "api/openapi.yaml", "docs_file": "/nonexistent",
 "clusters": [{"name": "east-a", "region": "r", "zone": "z", "url": "$ks",
               "token_file": "$tmp/ks-token", "ca_file": "$tmp/tls/ca.crt"}],
 "auth": {"issuer": "fleetgate-demo", "audience": "fleetgate",
          "keys": [{"kid": "demo", "pem_file": "$tmp/auth/jwt-public.pem", "algs": ["RS256"]}],
          "audit_log": "$tmp/audit.log"},
 "rate_limits": {"streams_per_principal": 10000, "read_per_minute": 1000000, "read_burst": 100000,
                 "project_read_per_minute": 1000000, "project_read_burst": 100000}}
JSON
"$FG_BUILD/fleetgate" -c "$tmp/fleetgate.json" 2>"$tmp/fleetgate.log" & pids+=($!)
echo $! >"$tmp/fleetgate.pid"
wait_http "http://127.0.0.1:$fg_port/healthz"
for _ in $(seq 1 200); do
    curl -fsS -o /dev/null -H "Authorization: Bearer $token" "http://127.0.0.1:$fg_port/v1/projects/demo/pods/web-9" 2>/dev/null && break
    sleep 0.05
done

get_p99() { # the p99 of 200 GETs of one pod, in ms
    for _ in $(seq 1 200); do
        curl -fsS -o /dev/null -w '%{time_total}\n' -H "Authorization: Bearer $token" \
            "http://127.0.0.1:$fg_port/v1/projects/demo/pods/web-1"
    done | sort -n | awk '{a[NR]=$1} END {printf "%.2f", a[int(NR*0.99)]*1000}'
}

direct_run() { # SECONDS: REF_STREAMS follows straight from kubesim, JSON
    /usr/bin/python3 tests/bench/stream_client.py direct \
        "$ks/api/v1/namespaces/demo/pods/web-{i}/log?follow=true&timestamps=true&tailLines=1" \
        ks-token "$tmp/tls/ca.crt" "$REF_STREAMS" "$1"
}
idle_p99=$(get_p99)
direct_idle=$(direct_run "$SECONDS_HELD")
# The GETs while the same number of follows read kubesim straight (the machine as loaded as in
# the run through fleetgate, fleetgate carrying no stream).
STEADY_FILE="$tmp/steady-direct" /usr/bin/python3 tests/bench/stream_client.py direct \
    "$ks/api/v1/namespaces/demo/pods/web-{i}/log?follow=true&timestamps=true&tailLines=1" \
    ks-token "$tmp/tls/ca.crt" "$STREAMS" "$SECONDS_HELD" >/dev/null &
refall=$!
for _ in $(seq 1 1200); do [ -s "$tmp/steady-direct" ] && break; sleep 0.1; done
sleep 1
ref_p99=$(get_p99)
wait "$refall"
# The streams through fleetgate; once every one has its head (steady state), the reference runs
# again at the same time, so kubesim is as loaded for it as for the streams through fleetgate,
# and so do the GETs.
STEADY_FILE="$tmp/steady" /usr/bin/python3 tests/bench/stream_client.py gate 127.0.0.1 "$fg_port" \
    "$token" "$STREAMS" "$SECONDS_HELD" "$tmp/fleetgate.pid" >"$tmp/gate.json" &
client=$!
for _ in $(seq 1 1200); do [ -s "$tmp/steady" ] && break; sleep 0.1; done
direct_run $((SECONDS_HELD - 2)) >"$tmp/direct.json" &
ref=$!
sleep 1
busy_p99=$(get_p99)
wait "$ref"
wait "$client"
direct=$(cat "$tmp/direct.json")
gate=$(cat "$tmp/gate.json")
echo "$bench: reference, $REF_STREAMS follows straight from kubesim before: $direct_idle"
echo "$bench: reference, $REF_STREAMS follows straight from kubesim alongside: $direct"
echo "$bench: $STREAMS follows through fleetgate: $gate"
/usr/bin/python3 - "$direct" "$gate" "$idle_p99" "$busy_p99" "$direct_idle" "$ref_p99" <<'PY'
import json, sys
d, g, di = json.loads(sys.argv[1]), json.loads(sys.argv[2]), json.loads(sys.argv[5])
print("stream_bench: RSS per follow stream %.1f KiB (%d streams, %d live at the end, all open in %.1f s)"
      % (g["rss_per_stream_kb"], g["streams"], g["live_at_end"], g["open_s"]))
print("stream_bench: line latency p50 %.2f ms (direct alongside %.2f, ratio %.2f), p99 %.2f ms (direct alongside %.2f, ratio %.2f)"
      % (g["p50_ms"], d["p50_ms"], g["p50_ms"] / d["p50_ms"], g["p99_ms"], d["p99_ms"], g["p99_ms"] / d["p99_ms"]))
print("stream_bench: direct alone before the streams: p50 %.2f ms, p99 %.2f ms" % (di["p50_ms"], di["p99_ms"]))
print("stream_bench: GET of a pod, p99 %s ms idle, %s ms with the streams open" % (sys.argv[3], sys.argv[4]))
print("stream_bench: fleetgate CPU per line relayed %s us (user + system over the held streams)"
      % g["cpu_us_per_line"])
idle, busy = float(sys.argv[3]), float(sys.argv[4])
print("stream_bench: GET of a pod, p99 ratio with the streams open / idle %.2f" % (busy / idle))
ref = float(sys.argv[6])
print("stream_bench: GET of a pod, p99 %.2f ms while the same follows read kubesim straight: "
      "through fleetgate / straight %.2f" % (ref, busy / ref))
print("stream_bench_json: " + json.dumps({
    "rss_kb": g["rss_per_stream_kb"], "p50": g["p50_ms"], "d50": d["p50_ms"],
    "r50": g["p50_ms"] / d["p50_ms"], "p99": g["p99_ms"], "d99": d["p99_ms"],
    "r99": g["p99_ms"] / d["p99_ms"], "get_idle": idle, "get_busy": busy,
    "get_ratio": busy / idle, "get_ref": ref, "get_vs_ref": busy / ref,
    "cpu_us": g["cpu_us_per_line"]}))
PY
