#!/usr/bin/env bash
# tests/bench/auth_bench.sh: authenticated, rate-limited GET /v1/whoami on fleetgate against nginx
# serving a static file of the same size, in the same run, under wrk at 32 connections.
#
#   make bench-auth            (or FG_BUILD=build tests/bench/auth_bench.sh)
#   BENCH_SECONDS=10 BENCH_ROUNDS=3 BENCH_CONNECTIONS=32 BENCH_WORKERS=<nproc> BENCH_THREADS=2
#
# Everything runs on free ports in a temp dir and is stopped at the end: a private redis-server
# (the rate limiter's), fleetgate with a key made here (conf/demo-auth.sh) and limits high enough
# that no call is refused (so every call runs the limiter's Lua script in Redis), and nginx-light
# with a temp config (same number of worker processes as fleetgate has worker threads, access logs
# off on both). The two take turns for BENCH_ROUNDS rounds; prints each round's req/s, then the
# median round's req/s and p50/p99 latencies of each, and the ratio fleetgate / nginx.
# The goal is a ratio >= 0.5.
#
# The refusal row: a second fleetgate (Redis database 1, so its buckets are its own) whose read
# limit is one call a minute answers the same token's calls with 429 after the first; its
# req/s over the first fleetgate's (the 200 path) is "ratio 429/200" (goal >= 1.0: refusing
# must never cost more than serving). Not part of `make test`.
set -euo pipefail

build=${FG_BUILD:-build}
seconds=${BENCH_SECONDS:-10}
rounds=${BENCH_ROUNDS:-3}
conns=${BENCH_CONNECTIONS:-32}
threads=${BENCH_THREADS:-2}
workers=${BENCH_WORKERS:-$(nproc)}
fleetgate=$build/fleetgate

for tool in wrk nginx redis-server openssl curl; do
    command -v "$tool" >/dev/null 2>&1 || [ -x "/usr/sbin/$tool" ] ||
        { echo "auth_bench: $tool is missing (make deps-bench)"; exit 1; }
done
[ -x "$fleetgate" ] || { echo "auth_bench: $fleetgate is missing (make all)"; exit 1; }
bench=auth_bench
. "$(dirname "$0")/lib.sh"
bench_tmp fg-bench-auth

# ---- redis, key, token ----------------------------------------------------
pick_port redis_port
redis-server --port "$redis_port" --bind 127.0.0.1 --dir "$tmp" --save '' --appendonly no \
    --daemonize no >"$tmp/redis.log" 2>&1 &
pids+=($!)
conf/demo-auth.sh "$tmp/demo" >/dev/null
token=$(cat "$tmp/demo/token")

# ---- fleetgate ------------------------------------------------------------
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
  "auth": {
    "issuer": "fleetgate-demo",
    "audience": "fleetgate",
    "keys": [{ "kid": "demo", "pem_file": "$tmp/demo/jwt-public.pem", "algs": ["RS256"] }],
    "audit_log": "$tmp/audit.log"
  },
  "rate_limits": { "read_per_minute": 60000000, "read_burst": 1000000 }
}
EOF
"$fleetgate" -c "$tmp/fleetgate.json" >"$tmp/fleetgate.log" 2>&1 &
pids+=($!)
# The caller over its limit: the same daemon but for one call a minute, in its own database.
pick_port limited_port
sed -e "s/127.0.0.1:$fg_port/127.0.0.1:$limited_port/" \
    -e "s#redis://127.0.0.1:$redis_port/0#redis://127.0.0.1:$redis_port/1#" \
    -e "s#$tmp/audit.log#$tmp/audit-limited.log#" \
    -e 's/"read_per_minute": 60000000, "read_burst": 1000000/"read_per_minute": 1, "read_burst": 1/' \
    "$tmp/fleetgate.json" >"$tmp/limited.json"
"$fleetgate" -c "$tmp/limited.json" >"$tmp/limited.log" 2>&1 &
pids+=($!)
limited_url="http://127.0.0.1:$limited_port/v1/whoami"
fg_url="http://127.0.0.1:$fg_port/v1/whoami"
wait_http "$fg_url" "Authorization: Bearer $token"
curl -fsS -H "Authorization: Bearer $token" -D "$tmp/fg.headers" -o "$tmp/whoami.json" "$fg_url"
grep -qi '^RateLimit-Remaining:' "$tmp/fg.headers" ||
    { echo "auth_bench: no RateLimit headers: the limiter is not in the path"; exit 1; }
size=$(stat -c %s "$tmp/whoami.json")
wait_http "$limited_url" "Authorization: Bearer $token"
code=$(curl -sS -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $token" "$limited_url")
[ "$code" = 429 ] || { echo "auth_bench: the limited daemon answered $code, not 429"; exit 1; }

# ---- nginx: a static file of the same size -------------------------------
start_nginx whoami.json "$size" "$workers"

# ---- the runs -------------------------------------------------------------
# The two servers take turns (fleetgate, nginx, fleetgate, ...) for BENCH_ROUNDS rounds, so a
# load change on the machine during the run hits both alike; each figure is the median round.
run_wrk() { # OUT URL [HEADER]
    wrk -t"$threads" -c"$conns" -d"${seconds}s" --latency ${3:+-H "$3"} "$2" >"$1"
}
field() { # FILE: Requests/sec, 50%, 99%
    awk '/^Requests\/sec:/ {rps=$2} /^ +50%/ {p50=$2} /^ +99%/ {p99=$2} END {print rps, p50, p99}' "$1"
}
median_round() { # NAME: the wrk output of the round with the median req/s
    for f in "$tmp"/wrk-"$1"-*.txt; do echo "$(field "$f" | cut -d' ' -f1) $f"; done |
        sort -n | awk '{a[NR]=$2} END {print a[int((NR + 1) / 2)]}'
}

echo "auth_bench: $rounds rounds of ${seconds}s each, wrk -t$threads -c$conns, $workers workers each," \
    "body $size bytes"
for r in $(seq 1 "$rounds"); do
    run_wrk "$tmp/wrk-fleetgate-$r.txt" "$fg_url" "Authorization: Bearer $token"
    run_wrk "$tmp/wrk-nginx-$r.txt" "$ng_url"
    run_wrk "$tmp/wrk-limited-$r.txt" "$limited_url" "Authorization: Bearer $token"
    printf 'round %d: fleetgate %s req/s, nginx %s req/s, fleetgate 429 path %s req/s\n' "$r" \
        "$(field "$tmp/wrk-fleetgate-$r.txt" | cut -d' ' -f1)" \
        "$(field "$tmp/wrk-nginx-$r.txt" | cut -d' ' -f1)" \
        "$(field "$tmp/wrk-limited-$r.txt" | cut -d' ' -f1)"
done

fg_bad=$(cat "$tmp"/wrk-fleetgate-*.txt | awk '/Non-2xx or 3xx responses:/ {n += $5} END {print n + 0}')
read -r fg_rps fg_p50 fg_p99 < <(field "$(median_round fleetgate)")
read -r ng_rps ng_p50 ng_p99 < <(field "$(median_round nginx)")
read -r lim_rps lim_p50 lim_p99 < <(field "$(median_round limited)")
ratio=$(awk -v a="$fg_rps" -v b="$ng_rps" 'BEGIN {printf "%.2f", a / b}')
refusal_ratio=$(awk -v a="$lim_rps" -v b="$fg_rps" 'BEGIN {printf "%.2f", a / b}')
lim_total=$(awk '/requests in/ {print $1}' "$(median_round limited)")
lim_bad=$(awk '/Non-2xx or 3xx responses:/ {print $5}' "$(median_round limited)")
printf '%-10s %12s %10s %10s   (median round)\n' "" "req/s" "p50" "p99"
printf '%-10s %12s %10s %10s\n' fleetgate "$fg_rps" "$fg_p50" "$fg_p99"
printf '%-10s %12s %10s %10s\n' nginx "$ng_rps" "$ng_p50" "$ng_p99"
printf '%-10s %12s %10s %10s\n' "fg 429" "$lim_rps" "$lim_p50" "$lim_p99"
echo "ratio fleetgate/nginx: $ratio (goal >= 0.5)"
echo "ratio 429/200: $refusal_ratio (goal >= 1.0)"
echo "audit lines for ${lim_total:-?} refused calls: $(wc -l <"$tmp/audit-limited.log")"
# One call a minute refills: a round that straddles a minute may let one through.
if [ $((${lim_total:-0} - ${lim_bad:-0})) -gt 2 ]; then
    echo "auth_bench: the limited daemon answered ${lim_bad:-0} refusals of ${lim_total:-?} calls"
    exit 1
fi
if [ "$fg_bad" != 0 ]; then
    echo "auth_bench: fleetgate answered $fg_bad non-2xx responses (see the config's limits)"
    exit 1
fi
