#!/usr/bin/env bash
# tests/bench/insights_bench.sh [CLIENTS] [SECONDS] (not in `make test`; `make bench-insights`):
#   1. change-stream fan-out: kubesim (one cluster), a private redis-server, fleetgate with its
#      informers; CLIENTS (default 1000) server-sent-event streams open on project demo, then a
#      Deployment PATCHed in kubesim at 1,000 and at 60,000 changes a minute for SECONDS (default
#      10) each: p50/p99 from the kubesim write to the LAST client's receipt, how many writes
#      reached every client, clients still open. The reference, in the same run: the same with
#      one client (the path without fan-out). RUNS (default 3) runs; medians.
#   2. Redis memory: per stored event of the timeline (20,000 events folded by
#      cache/insight_event.lua into 20 projects, against the same Redis empty) and the
#      retention bound under an hour of churn compressed (3,600 events a "minute" for 60
#      simulated minutes into one project bounded to 10,000 and 30 min: ZCARD and memory at the
#      end).
#   3. Redis memory per workload history entry: 20,000 scales of apps (a realistic simplified
#      Deployment, replicas changed each time) compared by cache/insight_history.lua into 20
#      projects, each followed by the cache write the informer makes; the figure is used_memory
#      with the history keys minus without them (DEL), per entry; and the retention bound under
#      216,000 changes over 60 simulated minutes into one project bounded to 10,000 and 30 min.
set -euo pipefail
bench=insights_bench
FG_BUILD=${FG_BUILD:-build}
CLIENTS=${1:-1000}
SECONDS_RUN=${2:-10}
RUNS=${RUNS:-3}
cd "$(dirname "$0")/../.."
. tests/bench/lib.sh
bench_tmp fg-insights-bench

ulimit -n "$(ulimit -Hn)"
pick_port redis_port; pick_port ks_port; pick_port fg_port

redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no --dir "$tmp" \
    >"$tmp/redis.log" 2>&1 & pids+=($!)
"$FG_BUILD/kubesim" --clusters 1 --base-port "$ks_port" --token ks-token --tls-dir "$tmp/tls" \
    --pod-start-ms 0 >"$tmp/kubesim.out" 2>"$tmp/kubesim.log" & pids+=($!)
for _ in $(seq 1 100); do grep -q '^cluster' "$tmp/kubesim.out" 2>/dev/null && break; sleep 0.05; done
ks="https://127.0.0.1:$ks_port"
kc() { curl -fsS --cacert "$tmp/tls/ca.crt" -H "Authorization: Bearer ks-token" -H 'Content-Type: application/json' "$@"; }
kc -X POST "$ks/api/v1/namespaces" -d '{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"demo"}}' >/dev/null
kc -X POST "$ks/apis/apps/v1/namespaces/demo/deployments" -d '{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"},"spec":{"replicas":0,"selector":{"matchLabels":{"run":"web"}},"template":{"metadata":{"labels":{"run":"web"}},"spec":{"containers":[{"name":"c","image":"nginx:1"}]}}}}' >/dev/null
echo ks-token >"$tmp/ks-token"
conf/demo-auth.sh "$tmp/auth" >/dev/null
token=$(cat "$tmp/auth/token")
cat >"$tmp/fleetgate.json" <<JSON
{"listen": "127.0.0.1:$fg_port", "workers": 4,
 "limits": {"max_connections": $((CLIENTS + 200)), "max_connections_per_client": $((CLIENTS + 200))},
 "redis": {"url": "redis://127.0.0.1:$redis_port/0"},
 "log": {"level": "warn", "access_log": false},
 "openapi_file": "api/openapi.yaml", "docs_file": "/nonexistent",
 "clusters": [{"name": "east-a", "region": "r", "zone": "z", "url": "$ks",
               "token_file": "$tmp/ks-token", "ca_file": "$tmp/tls/ca.crt"}],
 "auth": {"issuer": "fleetgate-demo", "audience": "fleetgate",
          "keys": [{"kid": "demo", "pem_file": "$tmp/auth/jwt-public.pem", "algs": ["RS256"]}],
          "audit_log": "$tmp/audit.log"},
 "rate_limits": {"streams_per_principal": 10000, "read_per_minute": 1000000, "read_burst": 100000,
                 "project_read_per_minute": 1000000, "project_read_burst": 100000},
 "insights": {"changes_max_per_project": 100000}}
JSON
"$FG_BUILD/fleetgate" -c "$tmp/fleetgate.json" 2>"$tmp/fleetgate.log" & pids+=($!)
wait_http "http://127.0.0.1:$fg_port/healthz"
for _ in $(seq 1 200); do
    curl -fsS -o /dev/null -H "Authorization: Bearer $token" "http://127.0.0.1:$fg_port/v1/projects/demo/apps/web" 2>/dev/null && break
    sleep 0.05
done

fanout() { # CLIENTS PER_MIN: one JSON line
    node tests/bench/sse_fanout.js "http://127.0.0.1:$fg_port" "$token" "$1" "$ks" ks-token \
        "$tmp/tls/ca.crt" "$2" "$SECONDS_RUN"
}
: >"$tmp/fanout.jsonl"
for run in $(seq 1 "$RUNS"); do
    for rate in 1000 60000; do
        ref=$(fanout 1 "$rate")
        all=$(fanout "$CLIENTS" "$rate")
        echo "$bench: run $run, $rate/min: 1 client $ref; $CLIENTS clients $all"
        echo "{\"rate\": $rate, \"ref\": $ref, \"all\": $all}" >>"$tmp/fanout.jsonl"
    done
done

/usr/bin/python3 - "$tmp/fanout.jsonl" "$CLIENTS" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
for rate in (1000, 60000):
    rs = [r for r in rows if r["rate"] == rate]
    med = lambda f: statistics.median(f(r) for r in rs)
    p50, p99 = med(lambda r: r["all"]["p50_ms"]), med(lambda r: r["all"]["p99_ms"])
    r50, r99 = med(lambda r: r["ref"]["p50_ms"]), med(lambda r: r["ref"]["p99_ms"])
    reach = med(lambda r: r["all"]["reached_all"] / max(1, r["all"]["writes"]))
    openf = med(lambda r: r["all"]["open_at_end"])
    print("insights_bench: %d changes/min, write -> last of %s clients: p50 %.1f ms, p99 %.1f ms "
          "(1 client: p50 %.1f, p99 %.1f; ratios %.1f, %.1f); writes reaching every client %.1f%%, "
          "clients open at the end %d (medians of %d runs)"
          % (rate, sys.argv[2], p50, p99, r50, r99, p50 / max(r50, 0.001), p99 / max(r99, 0.001),
             100 * reach, openf, len(rs)))
PY

# ---- Redis memory of the timeline --------------------------------------------------------
rc() { redis-cli -p "$redis_port" "$@"; }
used() { rc info memory | awk -F: '/^used_memory:/ {print $2}' | tr -d '\r'; }
sha=$(rc script load "$(cat cache/insight_event.lua)")
gen() { # PROJECTS EVENTS MAX_N MAX_AGE_MS T0 SPAN_MS: EVALSHA lines for redis-cli --pipe
    /usr/bin/python3 - "$sha" "$@" <<'PY'
import json, sys
sha, projects, events, max_n, max_age, t0, span = sys.argv[1], *map(int, sys.argv[2:])
def cmd(*a):
    out = "*%d\r\n" % len(a)
    for x in a:
        x = str(x).encode()
        out += "$%d\r\n" % len(x) + x.decode() + "\r\n"
    return out
w = sys.stdout.write
for i in range(events):
    p = "p%d" % (i % projects)
    t = t0 + span * i // max(1, events - 1)
    pod = "web-%05d" % i
    ev = {"name": "%s.%016x" % (pod, i), "project": p, "cluster": "east-a", "zone": "z",
          "type": "Warning" if i % 3 else "Normal", "reason": ["Scheduled", "Pulled", "BackOff"][i % 3],
          "message": "Back-off restarting failed container app in pod %s" % pod,
          "object": {"kind": "Pod", "name": pod, "uid": "u-%d" % i}, "count": 1, "source": "kubelet",
          "firstTime": "x", "lastTime": "x"}
    w(cmd("EVALSHA", sha, 3, "fg:ev:" + p, "fg:evx:" + p, "fg:o:pod:east-a:" + p,
          json.dumps(ev, separators=(",", ":")), t, t, t, max_age, max_n))
PY
}
rc flushall >/dev/null
base=$(used)
now=$(($(date +%s) * 1000))
gen 20 20000 1000000 604800000 "$now" 60000 | rc --pipe >/dev/null
after=$(used)
n=$(for p in $(seq 0 19); do rc zcard "fg:evx:p$p"; done | awk '{s+=$1} END {print s}')
echo "$bench: Redis memory per stored event: $(( (after - base) / n )) bytes ($n events in 20 projects, used_memory $base -> $after)"
rc flushall >/dev/null
base=$(used)
gen 1 216000 10000 1800000 "$now" 3600000 | rc --pipe >/dev/null
after=$(used)
echo "$bench: an hour of churn compressed (216,000 events over 60 simulated minutes, bound 10,000 and 30 min): $(rc zcard fg:evx:p0) events kept, $(rc hlen fg:ev:p0) entries, used_memory $base -> $after"

# ---- Redis memory of the workload history -----------------------------------------------
hsha=$(rc script load "$(cat cache/insight_history.lua)")
hgen() { # PROJECTS CHANGES MAX_N MAX_AGE_MS T0 SPAN_MS: EVALSHA + HSET lines for redis-cli --pipe
    /usr/bin/python3 - "$hsha" "$@" <<'PY'
import json, sys
sha, projects, changes, max_n, max_age, t0, span = sys.argv[1], *map(int, sys.argv[2:])
def cmd(*a):
    out = "*%d\r\n" % len(a)
    for x in a:
        x = str(x).encode()
        out += "$%d\r\n" % len(x) + x.decode() + "\r\n"
    return out
w = sys.stdout.write
apps = 50
for i in range(changes):
    p = "p%d" % (i % projects)
    app = "web-%03d" % ((i // projects) % apps)
    t = t0 + span * i // max(1, changes - 1)
    ver = str(1000 + i)
    obj = {"name": app, "project": p, "cluster": "east-a", "zone": "z", "uid": "u-%s-%s" % (p, app),
           "version": ver, "creationTime": "2026-11-22T10:00:00Z", "labels": {"team": "checkout"},
           "replicas": {"desired": 2 + i % 7, "current": 2 + i % 7, "ready": 2 + i % 7,
                        "updated": 2 + i % 7, "available": 2 + i % 7, "unavailable": 0},
           "paused": False, "strategy": {"type": "RollingUpdate", "maxSurge": "25%", "maxUnavailable": "25%"},
           "containers": [{"name": "app", "image": "registry.example.net/shop/web:1.42.0",
                           "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}],
           "revision": 3, "generation": 4, "observedGeneration": 4,
           "requestedBy": "alice@example.com", "requestId": "req-%d" % i}
    text = json.dumps(obj, separators=(",", ":"))
    key = "fg:o:app:east-a:" + p
    w(cmd("EVALSHA", sha, 4, key, "fg:hist:" + p, "fg:histx:" + p, "fg:rv:east-a:deployments",
          app, text, "App", "east-a", ver, t, max_age, max_n, "0", "watch"))
    w(cmd("HSET", key, app, text))
PY
}
rc flushall >/dev/null
now=$(($(date +%s) * 1000))
hgen 20 20000 1000000 2592000000 "$now" 60000 | rc --pipe >/dev/null
with=$(used)
n=$(for p in $(seq 0 19); do rc zcard "fg:histx:p$p"; done | awk '{s+=$1} END {print s}')
for p in $(seq 0 19); do rc del "fg:hist:p$p" "fg:histx:p$p" >/dev/null; done
without=$(used)
echo "$bench: Redis memory per history entry: $(( (with - without) / n )) bytes ($n entries in 20 projects, used_memory with the history $with, without $without)"
rc flushall >/dev/null
base=$(used)
hgen 1 216000 10000 1800000 "$now" 3600000 | rc --pipe >/dev/null
after=$(used)
echo "$bench: history under an hour of churn compressed (216,000 changes over 60 simulated minutes, bound 10,000 and 30 min): $(rc zcard fg:histx:p0) entries kept, $(rc hlen fg:hist:p0) in the hash, used_memory $base -> $after"
