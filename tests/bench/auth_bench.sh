#!/usr/bin/env bash
# tests/bench/auth_bench.sh: fleetgate's hot GET as shipped against nginx as a production front
# door would run, on the same request bytes and the same answer size, in the same run.
#
#   make bench-auth            (or FG_BUILD=build tests/bench/auth_bench.sh)
#   BENCH_SECONDS=10 BENCH_ROUNDS=3 BENCH_CONNECTIONS=32 BENCH_WORKERS=2 BENCH_THREADS=2
#
# Everything runs on free ports in a temp dir and is stopped at the end:
#   - a private redis-server filled with 100 pods as the informers write them;
#   - fleetgate as shipped: BENCH_WORKERS workers, an RS256 token checked, the read rate limits
#     on (high enough that no call is refused, so every call goes through the limiter), the
#     access log on (to a file), answering GET of one cached pod;
#   - nginx-light with BENCH_WORKERS worker processes, access_log on to a file with a 64 KiB
#     buffer, serving a static file of the pod answer's size, with header lines of the same
#     names and sizes fleetgate sends (X-Request-Id, RateLimit-*, ETag, Cache-Control), so both
#     send about the same bytes; the output prints each one's answer size;
#   - wrk sends the same request to both, Authorization header included.
# A third daemon, fleetgate without its access log and rate limits (same token, same Redis),
# gives the issue's second ratio (no log, no limit: goal >= 1.2x nginx).
# The refusals are measured on the same daemon and token: 401 (a token with a forged
# signature; the per-address refusal limit raised so that every call is a real 401), 403 (a
# project the token has no role in), 429 (a second daemon whose read limit is one call a
# minute, in its own Redis database).
# The servers take turns for BENCH_ROUNDS rounds (interleaved, so a load change hits all
# alike); each figure is the median round's req/s with its p50 and p99, plus the server's CPU
# per request (utime + stime from /proc over the round, all its processes). Prints
# fleetgate/nginx (issue 18's goal: >= 1.0, p99 no worse) and each refusal's ratio to the 200
# path (issue 11's goal for 429: >= 1.0). Not part of `make test`.
set -euo pipefail

build=${FG_BUILD:-build}
seconds=${BENCH_SECONDS:-10}
rounds=${BENCH_ROUNDS:-3}
conns=${BENCH_CONNECTIONS:-32}
threads=${BENCH_THREADS:-2}
workers=${BENCH_WORKERS:-2}
fleetgate=$build/fleetgate

for tool in wrk nginx redis-server redis-cli openssl curl; do
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
for _ in $(seq 1 100); do redis-cli -p "$redis_port" ping >/dev/null 2>&1 && break; sleep 0.05; done
fill_pods "$redis_port" 100
conf/demo-auth.sh "$tmp/demo" >/dev/null
token=$(cat "$tmp/demo/token")
# The same token with its signature's last characters changed: well-formed, refused with 401.
forged=${token%????}AAAA
[ "$forged" != "$token" ] || forged=${token%????}BBBB

# ---- fleetgate ------------------------------------------------------------
pick_port fg_port
cat >"$tmp/fleetgate.json" <<EOF
{
  "listen": "127.0.0.1:$fg_port",
  "workers": $workers,
  "limits": { "max_connections": 1024 },
  "redis": { "url": "redis://127.0.0.1:$redis_port/0" },
  "log": { "level": "warn", "access_log": true },
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
                   "project_read_per_minute": 60000000, "project_read_burst": 1000000,
                   "refusals_per_minute": 60000000, "refusal_burst": 1000000 }
}
EOF
"$fleetgate" -c "$tmp/fleetgate.json" >"$tmp/fleetgate.log" 2>&1 &
fg_pid=$!
pids+=($fg_pid)
# The caller over its limit: the same daemon but for one call a minute, in its own database.
pick_port limited_port
sed -e "s/127.0.0.1:$fg_port/127.0.0.1:$limited_port/" \
    -e "s#redis://127.0.0.1:$redis_port/0#redis://127.0.0.1:$redis_port/1#" \
    -e "s#$tmp/audit.log#$tmp/audit-limited.log#" \
    -e 's/"read_per_minute": 60000000, "read_burst": 1000000/"read_per_minute": 1, "read_burst": 1/' \
    -e 's/"project_read_per_minute": 60000000, "project_read_burst": 1000000/"project_read_per_minute": 1, "project_read_burst": 1/' \
    "$tmp/fleetgate.json" >"$tmp/limited.json"
# No access log, no rate limits: the same daemon otherwise.
pick_port bare_port
sed -e "s/127.0.0.1:$fg_port/127.0.0.1:$bare_port/" \
    -e 's/"access_log": true/"access_log": false/' \
    -e "s#$tmp/audit.log#$tmp/audit-bare.log#" \
    -e 's/"rate_limits": {/"rate_limits": { "enabled": false,/' \
    "$tmp/fleetgate.json" >"$tmp/bare.json"
"$fleetgate" -c "$tmp/bare.json" >"$tmp/bare.log" 2>&1 &
bare_pid=$!
pids+=($bare_pid)
# database 1 holds the same pods, so the limited daemon refuses the same GET
redis-cli -p "$redis_port" -n 1 --pipe <"$tmp/fill.resp" >/dev/null
"$fleetgate" -c "$tmp/limited.json" >"$tmp/limited.log" 2>&1 &
lim_pid=$!
pids+=($lim_pid)

auth="Authorization: Bearer $token"
pod=$(redis-cli -p "$redis_port" zrange fg:i:pod:bench-a:demo 0 0)
fg_url="http://127.0.0.1:$fg_port/v1/projects/demo/pods/$pod"
forbidden_url="http://127.0.0.1:$fg_port/v1/projects/other/pods/$pod"
limited_url="http://127.0.0.1:$limited_port/v1/projects/demo/pods/$pod"
bare_url="http://127.0.0.1:$bare_port/v1/projects/demo/pods/$pod"
wait_http "$fg_url" "$auth"
wait_http "$bare_url" "$auth"
curl -fsS -H "$auth" -D "$tmp/fg.headers" -o "$tmp/pod.json" "$fg_url"
grep -qi '^RateLimit-Remaining:' "$tmp/fg.headers" ||
    { echo "auth_bench: no RateLimit headers: the limiter is not in the path"; exit 1; }
size=$(stat -c %s "$tmp/pod.json")
expect() { # CODE URL HEADER
    local code
    code=$(curl -sS -o /dev/null -w '%{http_code}' -H "$3" "$2")
    [ "$code" = "$1" ] || { echo "auth_bench: $2 answered $code, not $1"; exit 1; }
}
for _ in $(seq 1 100); do
    [ "$(curl -sS -o /dev/null -w '%{http_code}' -H "$auth" "$limited_url")" = 429 ] && break
    sleep 0.05
done
expect 429 "$limited_url" "$auth"
expect 401 "$fg_url" "Authorization: Bearer $forged"
expect 403 "$forbidden_url" "$auth"

# ---- nginx: the same answer size, the same header lines, access log on -------
# Header lines as fleetgate sends them (values of the same length), so the bytes match.
hdr() { awk -v n="$1" 'BEGIN {IGNORECASE = 1} tolower($1) == tolower(n) ":" {sub(/^[^:]*: /, ""); sub(/\r$/, ""); print; exit}' "$tmp/fg.headers"; }
pick_port ng_port
mkdir -p "$tmp/www"
cp "$tmp/pod.json" "$tmp/www/pod.json"
chmod 755 "$tmp/www"
chmod 644 "$tmp/www/pod.json"
nginx_bin=$(command -v nginx || echo /usr/sbin/nginx)
cat >"$tmp/nginx.conf" <<NGINX
worker_processes $workers;
pid $tmp/nginx.pid;
error_log $tmp/nginx-error.log warn;
events { worker_connections 1024; }
http {
    access_log $tmp/nginx-access.log combined buffer=64k flush=1s;
    client_body_temp_path $tmp/nginx-body;
    proxy_temp_path $tmp/nginx-proxy;
    fastcgi_temp_path $tmp/nginx-fastcgi;
    uwsgi_temp_path $tmp/nginx-uwsgi;
    scgi_temp_path $tmp/nginx-scgi;
    default_type application/json;
    keepalive_requests 1000000;
    server {
        listen 127.0.0.1:$ng_port;
        root $tmp/www;
        add_header X-Request-Id \$request_id;
        add_header RateLimit-Limit "$(hdr RateLimit-Limit)";
        add_header RateLimit-Remaining "$(hdr RateLimit-Remaining)";
        add_header RateLimit-Reset "$(hdr RateLimit-Reset)";
        add_header Cache-Control "$(hdr Cache-Control)";
    }
}
NGINX
"$nginx_bin" -p "$tmp" -c "$tmp/nginx.conf" -g 'daemon off;' 2>"$tmp/nginx.stderr" &
ng_pid=$!
pids+=($ng_pid)
ng_url="http://127.0.0.1:$ng_port/pod.json"
wait_http "$ng_url"
answer_bytes() { # URL HEADER: header bytes + body bytes of one answer
    curl -sS -o /dev/null -w '%{size_header}+%{size_download}' -H "$2" "$1"
}
fg_bytes=$(answer_bytes "$fg_url" "$auth")
ng_bytes=$(answer_bytes "$ng_url" "$auth")

# ---- the runs -------------------------------------------------------------
cpu_ticks() { # PID...: utime + stime of these processes and their threads, in clock ticks
    local t=0 p
    for p in "$@"; do
        read -r -a f <"/proc/$p/stat"
        t=$((t + f[13] + f[14]))
    done
    echo "$t"
}
server_pids() { # NAME: the processes that serve NAME's requests
    case $1 in
    nginx) pgrep -P "$ng_pid" | tr '\n' ' ' ;;
    fg-429) echo "$lim_pid" ;;
    fg-nolog) echo "$bare_pid" ;;
    *) echo "$fg_pid" ;;
    esac
}
run_wrk() { # NAME ROUND URL HEADER
    local out="$tmp/wrk-$1-$2.txt" sp t0 t1
    # shellcheck disable=SC2207
    sp=($(server_pids "$1"))
    t0=$(cpu_ticks "${sp[@]}")
    wrk -t"$threads" -c"$conns" -d"${seconds}s" --latency -H "$4" "$3" >"$out"
    t1=$(cpu_ticks "${sp[@]}")
    echo "cpu_ticks $((t1 - t0))" >>"$out"
}
field() { # FILE: req/s, p50, p99, CPU µs per request
    awk -v hz="$(getconf CLK_TCK)" '/^Requests\/sec:/ {rps = $2} /^ +50%/ {p50 = $2} /^ +99%/ {p99 = $2}
        /requests in/ {n = $1} /^cpu_ticks/ {t = $2}
        END {printf "%s %s %s %.1f\n", rps, p50, p99, (n > 0 ? t / hz * 1e6 / n : 0)}' "$1"
}
median_round() { # NAME: the wrk output of the round with the median req/s
    for f in "$tmp"/wrk-"$1"-*.txt; do echo "$(field "$f" | cut -d' ' -f1) $f"; done |
        sort -n | awk '{a[NR] = $2} END {print a[int((NR + 1) / 2)]}'
}
non2xx() { cat "$tmp"/wrk-"$1"-*.txt | awk '/Non-2xx or 3xx responses:/ {n += $5} END {print n + 0}'; }

echo "auth_bench: $rounds interleaved rounds of ${seconds}s, wrk -t$threads -c$conns; $workers" \
    "workers each (fleetgate worker threads, nginx worker processes)"
echo "auth_bench: the same request bytes to both (GET with the Authorization header," \
    "${#token}-byte token); answer bytes (head+body): fleetgate $fg_bytes, nginx $ng_bytes"
echo "auth_bench: fleetgate as shipped (RS256 token, read rate limits through Redis, access log" \
    "to a file); nginx with access_log to a file (buffer=64k)"
echo "load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"
names=(fleetgate nginx fg-nolog fg-401 fg-403 fg-429)
for r in $(seq 1 "$rounds"); do
    run_wrk fleetgate "$r" "$fg_url" "$auth"
    run_wrk nginx "$r" "$ng_url" "$auth"
    run_wrk fg-nolog "$r" "$bare_url" "$auth"
    run_wrk fg-401 "$r" "$fg_url" "Authorization: Bearer $forged"
    run_wrk fg-403 "$r" "$forbidden_url" "$auth"
    run_wrk fg-429 "$r" "$limited_url" "$auth"
    line="round $r:"
    for n in "${names[@]}"; do line="$line $n $(field "$tmp/wrk-$n-$r.txt" | cut -d' ' -f1)"; done
    echo "$line req/s"
done

printf '%-24s %12s %10s %10s %14s   (median round)\n' "" "req/s" "p50" "p99" "CPU µs/req"
declare -A rps
for n in "${names[@]}"; do
    read -r a b c d < <(field "$(median_round "$n")")
    rps[$n]=$a
    case $n in
    fleetgate) label="fleetgate GET 200" ;;
    nginx) label="nginx GET 200" ;;
    fg-nolog) label="fg no log, no limit" ;;
    fg-401) label="fleetgate 401 (forged)" ;;
    fg-403) label="fleetgate 403 (no role)" ;;
    fg-429) label="fleetgate 429 (limit)" ;;
    esac
    printf '%-24s %12s %10s %10s %14s\n' "$label" "$a" "$b" "$c" "$d"
done
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }
echo "ratio fleetgate/nginx: $(ratio "${rps[fleetgate]}" "${rps[nginx]}") (issue 18's goal >= 1.0)"
echo "ratio fleetgate without access log and rate limits/nginx:" \
    "$(ratio "${rps[fg-nolog]}" "${rps[nginx]}") (issue 18's goal >= 1.2)"
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "ratio 401/200: $(ratio "${rps[fg-401]}" "${rps[fleetgate]}"), 403/200:" \
    "$(ratio "${rps[fg-403]}" "${rps[fleetgate]}"), 429/200: $(ratio "${rps[fg-429]}" "${rps[fleetgate]}")" \
    "(goal >= 1.0: refusing must never cost more than serving)"
echo "audit lines: $(wc -l <"$tmp/audit.log") for the 401s and 403s," \
    "$(wc -l <"$tmp/audit-limited.log") for the 429s (folded repeats)"

fg_bad=$(non2xx fleetgate)
ng_bad=$(non2xx nginx)
nolog_bad=$(non2xx fg-nolog)
[ "$fg_bad" = 0 ] && [ "$ng_bad" = 0 ] && [ "$nolog_bad" = 0 ] ||
    { echo "auth_bench: non-2xx answers on the 200 path: fleetgate $fg_bad, nginx $ng_bad," \
        "fleetgate without log and limits $nolog_bad"; exit 1; }
for n in fg-401 fg-403; do
    total=$(cat "$tmp"/wrk-$n-*.txt | awk '/requests in/ {n += $1} END {print n + 0}')
    bad=$(non2xx $n)
    [ "$bad" = "$total" ] || { echo "auth_bench: $n: $bad refusals of $total calls"; exit 1; }
done
grep -q '" 401 ' "$tmp/nginx-access.log" 2>/dev/null && { echo "auth_bench: nginx refused"; exit 1; }
true
