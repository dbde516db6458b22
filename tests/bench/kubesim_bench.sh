#!/usr/bin/env bash
# kubesim at scale (not in make test): seeds one cluster with --seed-nodes/--seed-pods, reports
# the seed time (kubesim's own line), the time to ready, RSS after seeding, and the time of a
# LIST of all pods paged with limit=500 end to end (and one unpaged LIST).
#   make kubesim-bench  (or FG_BUILD=build tests/bench/kubesim_bench.sh [NODES] [PODS])
set -eu
build=${FG_BUILD:-build}
NODES=${1:-3000}
PODS=${2:-120000}
tmp=$(mktemp -d /tmp/kubesim-bench-XXXXXX)
pid=""
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
t0=$(date +%s.%N)
"$build/kubesim" --clusters 1 --base-port "$port" --token bench --tls-dir "$tmp/tls" \
    --seed-nodes "$NODES" --seed-pods "$PODS" >"$tmp/out" 2>"$tmp/err" &
pid=$!
until grep -q "url https://" "$tmp/out" 2>/dev/null; do
    kill -0 "$pid" 2>/dev/null || { cat "$tmp/err"; exit 1; }
    sleep 0.05
done
t1=$(date +%s.%N)
cat "$tmp/err"
echo "ready after $(python3 -c "print(round($t1 - $t0, 2))") s"
echo "RSS after seeding: $(awk '/VmRSS/ {print $2, $3}' /proc/$pid/status)"
python3 - "$port" "$tmp/tls/ca.crt" <<'PY'
import re, ssl, sys, time, http.client
port, ca = int(sys.argv[1]), sys.argv[2]
ctx = ssl.create_default_context(cafile=ca)
conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx)
hdr = {"Authorization": "Bearer bench"}
t = time.time(); n = 0; pages = 0; cont = ""; size = 0
while True:
    conn.request("GET", "/api/v1/pods?limit=500" + ("&continue=" + cont if cont else ""), headers=hdr)
    body = conn.getresponse().read(); size += len(body)
    n += body.count(b'{"metadata":'); pages += 1  # the client's JSON decoding is not timed
    m = re.search(rb'"continue":"([^"]*)"', body[:400])
    cont = m.group(1).decode() if m else ""
    if not cont: break
print("paged LIST limit=500: %d pods in %d pages, %.1f MB, %.2f s" % (n, pages, size / 1e6, time.time() - t))
t = time.time()
conn.request("GET", "/api/v1/pods", headers=hdr)
body = conn.getresponse().read()
print("unpaged LIST: %d pods, %.1f MB, %.2f s" % (body.count(b'{"metadata":'), len(body) / 1e6, time.time() - t))
PY
echo "RSS after the LISTs: $(awk '/VmRSS/ {print $2, $3}' /proc/$pid/status)"
# churn: 6000 pod mutations a minute (100/s) while a paged LIST runs, then 20 s more; RSS after
A=(curl -sS --cacert "$tmp/tls/ca.crt" -H "Authorization: Bearer bench")
U="https://127.0.0.1:$port/_kubesim"
rv_of() { "${A[@]}" "$U/stats" | python3 -c 'import json,sys; print(json.load(sys.stdin)["resourceVersion"])'; }
rv0=$(rv_of)
"${A[@]}" -X POST "$U/churn" -d '{"perMinute":6000,"namespace":"demo"}' >/dev/null
t0=$(date +%s.%N)
python3 - "$port" "$tmp/tls/ca.crt" <<'PY'
import re, ssl, sys, time, http.client
port, ca = int(sys.argv[1]), sys.argv[2]
conn = http.client.HTTPSConnection("127.0.0.1", port, context=ssl.create_default_context(cafile=ca))
hdr = {"Authorization": "Bearer bench"}
t = time.time(); n = 0; pages = 0; cont = ""
while True:
    conn.request("GET", "/api/v1/pods?limit=500" + ("&continue=" + cont if cont else ""), headers=hdr)
    body = conn.getresponse().read()
    n += body.count(b'{"metadata":'); pages += 1
    m = re.search(rb'"continue":"([^"]*)"', body[:400])
    cont = m.group(1).decode() if m else ""
    if not cont: break
print("paged LIST limit=500 during churn (pages at the first page's RV): %d pods in %d pages, %.2f s" % (n, pages, time.time() - t))
PY
sleep 20
"${A[@]}" -X POST "$U/churn" -d '{"perMinute":0}' >/dev/null
rv1=$(rv_of)
echo "churn: $((rv1 - rv0)) mutations in $(python3 -c "print(round($(date +%s.%N) - $t0, 2))") s; RSS after: $(awk '/VmRSS/ {print $2, $3}' /proc/$pid/status)"
