#!/usr/bin/env bash
# tests/bench/callgrind_get.sh: instructions per hot GET, counted by callgrind (instruction counts
# do not move with the machine's load, so a regression shows as a number).
#
#   make bench-callgrind      (or FG_BUILD=build tests/bench/callgrind_get.sh)
#   BENCH_GETS=3000 BENCH_WORKERS=2 BENCH_KEEP=<dir: keep the two callgrind files there>
#
# The GET is issue 18's hot path as shipped: authenticated (an RS256 token), rate-limited (the
# read limit, through Redis), access-logged (log.access_log on), of one cached pod (the mirror
# holds it after the first read). Everything runs on free ports in a temp dir and is stopped at
# the end: a private redis-server filled with 100 pods as the informers write them, and
# fleetgate under `valgrind --tool=callgrind`, twice:
#   - measured: start, 20 warm-up GETs, BENCH_GETS GETs on one keep-alive connection, SIGTERM;
#   - idle: start, the same 20 warm-up GETs, then as long a wait as the GETs took, SIGTERM.
# Instructions per GET = (measured - idle) / BENCH_GETS: start-up, warm-up, the background
# threads' wake-ups and shutdown cancel out. Also prints the functions that cost most per GET
# (self cost, the same difference). The reference, measured the same way with the same request
# bytes: build/bench/bare_mhd, a libmicrohttpd server with fleetgate's daemon flags and memory
# pool answering a fixed body of the pod answer's size (issue 18's goal: fleetgate <= 2x the
# bare server). Not part of `make test`.
set -euo pipefail

build=${FG_BUILD:-build}
gets=${BENCH_GETS:-3000}
workers=${BENCH_WORKERS:-2}
fleetgate=$build/fleetgate
bare=$build/bench/bare_mhd
pool_bytes=16384 # MHD_POOL_BYTES in src/http/server.c: the bare server gets the same pool

for tool in valgrind callgrind_annotate redis-server redis-cli openssl curl; do
    command -v "$tool" >/dev/null 2>&1 ||
        { echo "callgrind_get: $tool is missing (make deps)"; exit 1; }
done
[ -x "$fleetgate" ] && [ -x "$bare" ] ||
    { echo "callgrind_get: $fleetgate or $bare is missing (make all)"; exit 1; }
bench=callgrind_get
. "$(dirname "$0")/lib.sh"
bench_tmp fg-bench-callgrind

pick_port redis_port
redis-server --port "$redis_port" --bind 127.0.0.1 --dir "$tmp" --save '' --appendonly no \
    --daemonize no >"$tmp/redis.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 100); do redis-cli -p "$redis_port" ping >/dev/null 2>&1 && break; sleep 0.05; done
fill_pods "$redis_port" 100

conf/demo-auth.sh "$tmp/demo" >/dev/null
token=$(cat "$tmp/demo/token")
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
                   "project_read_per_minute": 60000000, "project_read_burst": 1000000 }
}
EOF
pod=$(redis-cli -p "$redis_port" zrange fg:i:pod:bench-a:demo 0 0)
url="http://127.0.0.1:$fg_port/v1/projects/demo/pods/$pod"

pick_port bare_port
bare_url="http://127.0.0.1:$bare_port/v1/projects/demo/pods/$pod"

gets_config() { # N URL: a curl config for N GETs, one after another on one connection
    printf 'header = "Authorization: Bearer %s"\nwrite-out = "%%{http_code}\\n"\n' "$token"
    for _ in $(seq 1 "$1"); do printf 'url = "%s"\noutput = "/dev/null"\n' "$2"; done
}

run_gets() { # CONFIG N: the GETs; every answer must be a 200
    local codes
    codes=$(curl -sS -K "$1")
    [ "$(grep -c '^200$' <<<"$codes")" = "$2" ] ||
        { echo "callgrind_get: not every GET answered 200: $(sort <<<"$codes" | uniq -c | tr '\n' ' ')"; exit 1; }
}

# run_daemon NAME URL COMMAND...: COMMAND under callgrind; warm-up, then the GETs (NAME
# measured*) or a wait as long as they took (idle*); its total instructions in $tmp/NAME.total.
gets_seconds=0
run_daemon() {
    local name=$1 url=$2
    shift 2
    gets_config 20 "$url" >"$tmp/warm.curl"
    gets_config "$gets" "$url" >"$tmp/gets.curl"
    valgrind --tool=callgrind --callgrind-out-file="$tmp/$name.out" "$@" >"$tmp/$name.log" 2>&1 &
    local pid=$!
    pids+=($pid)
    set -- "$name"
    for _ in $(seq 1 600); do
        curl -fsS -o "$tmp/answer.json" -H "Authorization: Bearer $token" "$url" 2>/dev/null && break
        kill -0 "$pid" 2>/dev/null || { echo "callgrind_get: fleetgate died (see $1.log)"; cat "$tmp/$1.log"; exit 1; }
        sleep 0.1
    done
    run_gets "$tmp/warm.curl" 20
    if [ "${1#measured}" != "$1" ]; then
        local t0 t1
        t0=$(date +%s%N)
        run_gets "$tmp/gets.curl" "$gets"
        t1=$(date +%s%N)
        gets_seconds=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.3f", (b - a) / 1e9}')
    else
        sleep "$gets_seconds"
    fi
    kill -TERM "$pid"
    wait "$pid" || true
    awk '/^(summary|totals):/ {print $2; exit}' "$tmp/$1.out" >"$tmp/$1.total"
    # The "file:function" table: "1,234 (5.6%)  file:function [object]" lines, to the blank line.
    callgrind_annotate --auto=no --threshold=100 "$tmp/$1.out" 2>/dev/null |
        awk '/file:function/ {on = 1; next} on && /^-+$/ {next} on && /^ *$/ {exit}
             on {n = $1; gsub(",", "", n); sub(/^ *[0-9,]+ +\( *[0-9.]+%\) +/, ""); sub(/ \[[^]]*\]$/, "")
                 print n "\t" $0}' >"$tmp/$1.functions"
}

echo "callgrind_get: fleetgate under callgrind, $workers workers, $gets GETs of a cached pod" \
    "(RS256 token, read rate limit, access log on), minus an idle run"
run_daemon measured "$url" "$fleetgate" -c "$tmp/fleetgate.json"
size=$(stat -c %s "$tmp/answer.json")
fg_seconds=$gets_seconds
run_daemon idle "$url" "$fleetgate" -c "$tmp/fleetgate.json"
run_daemon measured-bare "$bare_url" "$bare" "$bare_port" "$size" "$workers" "$pool_bytes"
run_daemon idle-bare "$bare_url" "$bare" "$bare_port" "$size" "$workers" "$pool_bytes"
if [ -n "${BENCH_KEEP:-}" ]; then mkdir -p "$BENCH_KEEP" && cp "$tmp"/measured.out "$tmp"/idle.out "$BENCH_KEEP"/; fi
measured=$(cat "$tmp/measured.total")
idle=$(cat "$tmp/idle.total")
[ -n "$measured" ] && [ -n "$idle" ] || { echo "callgrind_get: no callgrind totals"; exit 1; }
lines=$(grep -c '"msg":"access"' "$tmp/measured.log" || true)
[ "$lines" -ge "$gets" ] ||
    { echo "callgrind_get: $lines access lines for $gets GETs: the access log is not on the path"; exit 1; }

echo "the $gets GETs took ${fg_seconds}s under valgrind"
echo "top functions per GET (self instructions, measured - idle):"
awk -F'\t' -v n="$gets" 'NR == FNR {idle[$2] = $1; next} {d = ($1 - idle[$2]) / n; if (d > 0) print d "\t" $2}' \
    "$tmp/idle.functions" "$tmp/measured.functions" | sort -rn |
    awk -F'\t' 'NR <= 12 {printf "  %10.0f  %s\n", $1, $2}'
bare_measured=$(cat "$tmp/measured-bare.total")
bare_idle=$(cat "$tmp/idle-bare.total")
awk -v m="$measured" -v i="$idle" -v n="$gets" -v bm="$bare_measured" -v bi="$bare_idle" -v size="$size" \
    'BEGIN {f = (m - i) / n; b = (bm - bi) / n
            printf "bare libmicrohttpd server (same flags and pool, a fixed %d-byte body): %.0f per GET\n", size, b
            printf "instructions per GET: %.0f (measured %d - idle %d, / %d)\n", f, m, i, n
            printf "fleetgate / bare server: %.2f (issue 18: <= 2)\n", f / b}'
