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
#   3. the normal API meanwhile (tests/bench/get_load.py): GET_RATE (200) GETs a second of
#      one pod on one keep-alive connection, as the SDKs keep theirs, for GET_SECONDS (SECONDS
#      - 3) in three windows of one run: idle; while the same STREAMS follows read kubesim
#      straight (the like-with-like reference: kubesim's writers and a client reading STREAMS
#      sockets the way the gate's client does, one thread and one selector, decrypting the TLS
#      fleetgate's loop decrypts, so fleetgate carries none of it); and during step 2's held
#      window. Each window prints the client's p50/p99 and fleetgate's own (the durationMs of
#      its access lines for those GETs: no client scheduling in it), how long fleetgate's API
#      workers waited for a core per GET (/proc schedstat), and what loaded the machine: cores
#      busy by process, "rest of the machine" being other users;
#   4. fleetgate's CPU time (user + system, from /proc) per line relayed while the streams are
#      held: unlike the latencies, other processes on a loaded machine do not inflate it.
# The follows through fleetgate speak HTTP/1.1 (chunked, as kubectl and curl get them);
# STREAM_HTTP=1.0 makes them HTTP/1.0 as before 2026-11-24 (libmicrohttpd's resume path).
# The whole is run RUNS times (default 3), each from scratch; a last table gives each figure's
# median and spread (min-max) over the runs, the GETs' p99 also as ratios through fleetgate /
# straight and through / idle. The hard case is kept: kubesim dates every pod's lines from the same whole second,
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
        ("GET p99 client, idle (ms)", "get_idle"),
        ("GET p99 client, follows straight to kubesim (ms)", "get_ref"),
        ("GET p99 client, follows through fleetgate (ms)", "get_busy"),
        ("GET p99 client ratio, through / straight", "get_vs_ref"),
        ("GET p99 client ratio, through / idle", "get_ratio"),
        ("GET p99 fleetgate's own, idle (ms)", "sget_idle"),
        ("GET p99 fleetgate's own, straight (ms)", "sget_ref"),
        ("GET p99 fleetgate's own, through (ms)", "sget_busy"),
        ("GET p50 fleetgate's own, straight (ms)", "sget50_ref"),
        ("GET p50 fleetgate's own, through (ms)", "sget50_busy"),
        ("GET p99 fleetgate's own ratio, through / straight", "sget_vs_ref"),
        ("GET p99 fleetgate's own ratio, through / idle", "sget_ratio"),
        ("cores busy, straight window", "box_ref"), ("cores busy, through window", "box_busy"),
        ("  of which other users, straight", "rest_ref"),
        ("  of which other users, through", "rest_busy"),
        ("  of which fleetgate, through", "fg_cores_busy"),
        ("API workers' wait for a core per GET, idle (us)", "wait_idle"),
        ("API workers' wait for a core per GET, straight (us)", "wait_ref"),
        ("API workers' wait for a core per GET, through (us)", "wait_busy"),
        ("fleetgate CPU per line relayed (us)", "cpu_us")]
print("stream_bench: summary of %d runs, %s follows (synchronized kubesim bursts): median (min-max)"
      % (len(runs), sys.argv[2]))
for name, k in rows:
    xs = [r[k] for r in runs if r.get(k) is not None]
    if xs:
        print("stream_bench:   %-50s %8.3f  (%.3f-%.3f)  runs: %s"
              % (name, statistics.median(xs), min(xs), max(xs), " ".join("%.3f" % x for x in xs)))
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
 "log": {"level": "warn", "access_log": true},
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

# The API's requests: GET_RATE GETs a second (default 200) of one pod on one keep-alive
# connection, for GET_SECONDS (SECONDS - 3, at least 5) in each of three windows: the streams'
# whole held window, and the same length idle and with the follows read straight from kubesim.
# Each window prints the client's p50/p99 and fleetgate's own (its access lines' durationMs),
# and what loaded the machine meanwhile (cores busy, by process; "rest of the machine" is what
# other users ran).
GET_RATE=${GET_RATE:-200}
GET_SECONDS=${GET_SECONDS:-$((SECONDS_HELD - 3 > 5 ? SECONDS_HELD - 3 : 5))}
fg_pid=$(cat "$tmp/fleetgate.pid")
get_window() { # TAG [NAME=PID ...]: JSON {"client": ..., "server": ...}
    local tag=$1 out
    shift
    out=$(/usr/bin/python3 tests/bench/get_load.py "http://127.0.0.1:$fg_port/v1/projects/demo/pods/web-1" \
        "$token" "$GET_RATE" "$GET_SECONDS" "$tag" "fleetgate=$fg_pid" "kubesim=${pids[1]}" \
        "redis=${pids[0]}" "$@")
    local calls
    calls=$(echo "$out" | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["calls"])')
    echo "{\"client\": $out, \"server\": $(/usr/bin/python3 tests/bench/get_load.py access \
        "$tmp/fleetgate.log" "$tag" "$calls")}"
}

direct_run() { # SECONDS: REF_STREAMS follows straight from kubesim, JSON
    /usr/bin/python3 tests/bench/stream_client.py direct \
        "$ks/api/v1/namespaces/demo/pods/web-{i}/log?follow=true&timestamps=true&tailLines=1" \
        ks-token "$tmp/tls/ca.crt" "$REF_STREAMS" "$1"
}
get_idle=$(get_window idle)
direct_idle=$(direct_run "$SECONDS_HELD")
# The GETs while the same number of follows read kubesim straight (the machine as loaded as in
# the run through fleetgate, fleetgate carrying no stream).
# The client reads them as it reads the follows through fleetgate (one thread, one selector,
# HTTP/1.1), and decrypts the TLS records fleetgate's loop decrypts in step 2.
STEADY_FILE="$tmp/steady-direct" /usr/bin/python3 tests/bench/stream_client.py straight \
    "$ks/api/v1/namespaces/demo/pods/web-{i}/log?follow=true&timestamps=true&tailLines=1" \
    ks-token "$tmp/tls/ca.crt" "$STREAMS" "$SECONDS_HELD" >"$tmp/straight.json" &
refall=$!
for _ in $(seq 1 1200); do
    [ -s "$tmp/steady-direct" ] && break
    kill -0 "$refall" 2>/dev/null || { wait "$refall"; exit 1; } # it failed at open: said why
    sleep 0.1
done
sleep 1
get_ref=$(get_window straight "stream-client=$refall")
wait "$refall"
# The streams through fleetgate; once every one has its head (steady state), the reference runs
# again at the same time, so kubesim is as loaded for it as for the streams through fleetgate,
# and so do the GETs.
STEADY_FILE="$tmp/steady" /usr/bin/python3 tests/bench/stream_client.py gate 127.0.0.1 "$fg_port" \
    "$token" "$STREAMS" "$SECONDS_HELD" "$tmp/fleetgate.pid" >"$tmp/gate.json" &
client=$!
for _ in $(seq 1 1200); do
    [ -s "$tmp/steady" ] && break
    kill -0 "$client" 2>/dev/null || { wait "$client"; exit 1; } # an open failed: said why
    sleep 0.1
done
direct_run $((SECONDS_HELD - 2)) >"$tmp/direct.json" &
ref=$!
sleep 1
get_busy=$(get_window busy "stream-client=$client" "direct-ref=$ref")
wait "$ref"
wait "$client"
direct=$(cat "$tmp/direct.json")
gate=$(cat "$tmp/gate.json")
echo "$bench: the same follows read straight (the GETs' reference window): $(cat "$tmp/straight.json")"
echo "$bench: reference, $REF_STREAMS follows straight from kubesim before: $direct_idle"
echo "$bench: reference, $REF_STREAMS follows straight from kubesim alongside: $direct"
echo "$bench: $STREAMS follows through fleetgate: $gate"
/usr/bin/python3 - "$direct" "$gate" "$direct_idle" "$get_idle" "$get_ref" "$get_busy" <<'PY'
import json, sys
d, g, di = json.loads(sys.argv[1]), json.loads(sys.argv[2]), json.loads(sys.argv[3])
w = {"idle": json.loads(sys.argv[4]), "straight": json.loads(sys.argv[5]),
     "busy": json.loads(sys.argv[6])}
print("stream_bench: RSS per follow stream %.1f KiB (%d streams, %d live at the end, all open in %.1f s)"
      % (g["rss_per_stream_kb"], g["streams"], g["live_at_end"], g["open_s"]))
print("stream_bench: line latency p50 %.2f ms (direct alongside %.2f, ratio %.2f), p99 %.2f ms (direct alongside %.2f, ratio %.2f)"
      % (g["p50_ms"], d["p50_ms"], g["p50_ms"] / d["p50_ms"], g["p99_ms"], d["p99_ms"], g["p99_ms"] / d["p99_ms"]))
print("stream_bench: direct alone before the streams: p50 %.2f ms, p99 %.2f ms" % (di["p50_ms"], di["p99_ms"]))
print("stream_bench: fleetgate CPU per line relayed %s us (user + system over the held streams)"
      % g["cpu_us_per_line"])
what = {"idle": "no streams", "straight": "the same follows read kubesim straight",
        "busy": "the follows through fleetgate (+ the direct reference)"}
for k in ("idle", "straight", "busy"):
    c, s = w[k]["client"], w[k]["server"]
    print("stream_bench: GET of a pod, %s: %d calls (%d errors) at %.0f/s on one keep-alive "
          "connection: client p50 %.2f p99 %.2f max %.1f ms; fleetgate's own (access log, %d lines) "
          "p50 %.3f p99 %.3f max %.1f ms"
          % (what[k], c["calls"], c["errors"], c["rate"], c["p50_ms"], c["p99_ms"], c["max_ms"],
             s["lines"], s["p50_ms"], s["p99_ms"], s["max_ms"]))
    print("stream_bench:   fleetgate's threads per GET, waiting for a core / running (us): %s"
          % ", ".join("%s %.1f / %.1f" % (n, c["fleetgate_wait_us_per_get"][n],
                                          c["fleetgate_run_us_per_get"][n])
                      for n in sorted(c["fleetgate_wait_us_per_get"])))
    print("stream_bench:   the machine meanwhile: %.2f of %d cores busy (load avg %s before): %s"
          % (c["box_cores_busy"], c["ncpu"], c["loadavg_before"],
             ", ".join("%s %.2f" % kv for kv in sorted(c["cores_by_process"].items(),
                                                          key=lambda kv: -kv[1]))))
cp = lambda k: w[k]["client"]["p99_ms"]
sp = lambda k: w[k]["server"]["p99_ms"]
print("stream_bench: GET p99 through fleetgate / straight: client %.2f, fleetgate's own %.2f; "
      "streams open / idle: client %.2f, fleetgate's own %.2f"
      % (cp("busy") / cp("straight"), sp("busy") / sp("straight"), cp("busy") / cp("idle"),
         sp("busy") / sp("idle")))
print("stream_bench_json: " + json.dumps({
    "rss_kb": g["rss_per_stream_kb"], "p50": g["p50_ms"], "d50": d["p50_ms"],
    "r50": g["p50_ms"] / d["p50_ms"], "p99": g["p99_ms"], "d99": d["p99_ms"],
    "r99": g["p99_ms"] / d["p99_ms"],
    "get_idle": cp("idle"), "get_ref": cp("straight"), "get_busy": cp("busy"),
    "get_vs_ref": cp("busy") / cp("straight"), "get_ratio": cp("busy") / cp("idle"),
    "sget_idle": sp("idle"), "sget_ref": sp("straight"), "sget_busy": sp("busy"),
    "sget50_busy": w["busy"]["server"]["p50_ms"], "sget50_ref": w["straight"]["server"]["p50_ms"],
    "sget_vs_ref": sp("busy") / sp("straight"), "sget_ratio": sp("busy") / sp("idle"),
    "box_busy": w["busy"]["client"]["box_cores_busy"],
    "box_ref": w["straight"]["client"]["box_cores_busy"],
    "rest_busy": w["busy"]["client"]["cores_by_process"]["rest of the machine"],
    "rest_ref": w["straight"]["client"]["cores_by_process"]["rest of the machine"],
    "fg_cores_busy": w["busy"]["client"]["cores_by_process"].get("fleetgate"),
    "wait_busy": w["busy"]["client"]["fleetgate_wait_us_per_get"].get("MHD-worker"),
    "wait_ref": w["straight"]["client"]["fleetgate_wait_us_per_get"].get("MHD-worker"),
    "wait_idle": w["idle"]["client"]["fleetgate_wait_us_per_get"].get("MHD-worker"),
    "cpu_us": g["cpu_us_per_line"]}))
PY
