#!/usr/bin/env bash
# tests/bench/reads_offload.sh: reads never reach a member cluster (issue 5's offload figure).
#
#   make bench-reads-offload  (or FG_BUILD=build tests/bench/reads_offload.sh)
#   OFFLOAD_READS=10000 OFFLOAD_PODS=200
#
# Starts, on free ports in a temp dir, a private redis-server, build/kubesim with one cluster
# seeded with nodes and OFFLOAD_PODS pods in project "demo", and fleetgate with its informers on.
# Waits for /readyz (first sync done), reads kubesim's request counters (/_kubesim/stats), sends
# OFFLOAD_READS reads through fleetgate (pod list pages, pod gets, cluster and project gets) and
# reads the counters again: every verb but watch must be unchanged (0 requests caused by the
# reads; the informers' long-lived watches are the only traffic). Not part of `make test`.
set -euo pipefail

build=${FG_BUILD:-build}
reads=${OFFLOAD_READS:-10000}
npods=${OFFLOAD_PODS:-200}
for tool in redis-server redis-cli curl wrk openssl; do
    command -v "$tool" >/dev/null 2>&1 || { echo "reads_offload: $tool is missing (make deps)"; exit 1; }
done
for b in fleetgate kubesim; do
    [ -x "$build/$b" ] || { echo "reads_offload: $build/$b is missing (make all)"; exit 1; }
done

bench=reads_offload
. "$(dirname "$0")/lib.sh"
bench_tmp fg-bench-offload


pick_port redis_port
redis-server --port "$redis_port" --bind 127.0.0.1 --dir "$tmp" --save '' --appendonly no \
    --daemonize no >"$tmp/redis.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 100); do redis-cli -p "$redis_port" ping >/dev/null 2>&1 && break; sleep 0.05; done

pick_port ks_port
kstoken=offload-cluster-token
printf '%s\n' "$kstoken" >"$tmp/kubesim-token"
printf '{"clusters": [{"name": "off-a", "region": "r", "zone": "zone-a", "port": %d, "token": "%s"}]}\n' \
    "$ks_port" "$kstoken" >"$tmp/kubesim.json"
"$build/kubesim" --config "$tmp/kubesim.json" --token "$kstoken" --tls-dir "$tmp/tls" \
    --seed-nodes 4 --seed-pods "$npods" --seed-namespace demo >"$tmp/kubesim.out" 2>"$tmp/kubesim.log" &
pids+=($!)
for _ in $(seq 200); do grep -q '^cluster ' "$tmp/kubesim.out" 2>/dev/null && break; sleep 0.05; done
grep -q '^cluster ' "$tmp/kubesim.out" || { cat "$tmp/kubesim.log"; echo "reads_offload: kubesim did not start"; exit 1; }
ks="https://127.0.0.1:$ks_port"
stats() { curl -fsS --cacert "$tmp/tls/ca.crt" -H "Authorization: Bearer $kstoken" "$ks/_kubesim/stats"; }

conf/demo-auth.sh "$tmp/demo" >/dev/null
token=$(cat "$tmp/demo/token")
pick_port fg_port
cat >"$tmp/fleetgate.json" <<EOF
{
  "listen": "127.0.0.1:$fg_port",
  "workers": 4,
  "redis": { "url": "redis://127.0.0.1:$redis_port/0" },
  "log": { "level": "warn", "access_log": false },
  "openapi_file": "api/openapi.yaml",
  "docs_file": "/nonexistent/docs.html",
  "clusters": [{ "name": "off-a", "region": "r", "zone": "zone-a", "url": "$ks",
                 "token_file": "$tmp/kubesim-token", "ca_file": "$tmp/tls/ca.crt" }],
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
"$build/fleetgate" -c "$tmp/fleetgate.json" >"$tmp/fleetgate.log" 2>&1 &
pids+=($!)
base="http://127.0.0.1:$fg_port"
for _ in $(seq 1 300); do
    curl -fsS -o /dev/null "$base/readyz" 2>/dev/null && break
    sleep 0.1
done
curl -fsS -o /dev/null "$base/readyz" ||
    { curl -sS "$base/readyz"; echo; echo "reads_offload: fleetgate is not ready"; exit 1; }
auth="Authorization: Bearer $token"
pod=$(curl -fsS -H "$auth" "$base/v1/projects/demo/pods?limit=1" | grep -o '"name":"[^"]*"' |
    awk -F'"' 'NR == 1 {print $4}')
[ -n "$pod" ] || { echo "reads_offload: no pod in the cache after the first sync"; exit 1; }
cached=$(curl -fsS -H "$auth" "$base/v1/projects/demo/pods?limit=1000" | grep -o '"podIP"' | wc -l)
# What kubesim's objects become through the cache answers as the contract says.
if command -v node >/dev/null 2>&1; then
    for path in /v1/projects/demo/pods "/v1/projects/demo/pods/$pod" /v1/projects/demo/apps \
        /v1/clusters/off-a /v1/projects/demo; do
        curl -sS -D "$tmp/h" -o "$tmp/b" -H "$auth" "$base$path"
        status=$(awk 'NR == 1 {print $2}' "$tmp/h")
        node tests/contract/validate.mjs --method GET --path "$path" --status "$status" \
            --headers "$(cat "$tmp/h")" <"$tmp/b" ||
            { echo "reads_offload: GET $path ($status) breaks the contract"; exit 1; }
    done
    echo "reads_offload: pods, apps, the cluster and the project from kubesim follow the contract"
fi
sleep 1
stats >"$tmp/before.json"

# The reads: wrk in four parts, each until it has sent its share (wrk stops on a duration, so it
# runs a short while and the counts are taken from its own report).
sent=0
for url in "$base/v1/projects/demo/pods?limit=50" "$base/v1/projects/demo/pods/$pod" \
    "$base/v1/clusters/off-a" "$base/v1/projects/demo"; do
    n=0
    while [ "$n" -lt $((reads / 4)) ]; do
        got=$(wrk -t1 -c4 -d1s -H "$auth" "$url" | awk '/requests in/ {print $1}')
        n=$((n + got))
    done
    sent=$((sent + n))
done
sleep 1
stats >"$tmp/after.json"
verbs() { tr -d ' \n' <"$1" | grep -o '"requests":{[^}]*}'; }
echo "reads_offload: $cached pods cached from kubesim; $sent reads sent through fleetgate"
echo "  kubesim requests before: $(verbs "$tmp/before.json")"
echo "  kubesim requests after:  $(verbs "$tmp/after.json")"
b=$(verbs "$tmp/before.json" | sed 's/"watch":[0-9]*,\{0,1\}//')
a=$(verbs "$tmp/after.json" | sed 's/"watch":[0-9]*,\{0,1\}//')
if [ "$a" = "$b" ]; then
    echo "reads_offload: 0 requests reached the member cluster (watches aside) for $sent reads"
else
    echo "reads_offload: the member cluster saw requests during the reads"; exit 1
fi
