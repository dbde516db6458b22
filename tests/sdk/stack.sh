#!/usr/bin/env bash
# tests/sdk/stack.sh CMD [ARGS...]: runs CMD against a live fleetgate, as the SDK and CLI suites
# (and their benchmarks) need one: a private redis-server, kubesim (SDK_CLUSTERS clusters, default
# 1, each seeded with SDK_SEED_PODS pods in project "demo" as Deployments svc-NNNNN of 10 pods),
# fleetgate in front of them, all on 127.0.0.1 and free ports, in a temp dir removed at exit with
# every process started here. CMD sees:
#   FLEETGATE_URL          http://127.0.0.1:PORT
#   FG_TOKEN_ADMIN         a platform admin (group fleetgate-admins)
#   FG_TOKEN_OPERATOR      operator of project "demo" (exec needs it)
#   FG_TOKEN_VIEWER        viewer of project "demo" (writes answer 403)
#   FG_TOKEN_OTHER         developer of project "other" only
#   FG_TOKEN_EXPIRED       an admin token whose exp is in the past (401)
#   FG_TOKEN_CMD           a command printing a fresh admin token (a refreshable provider's source)
#   FG_KUBESIM_URL, FG_KUBESIM_TOKEN, FG_KUBESIM_CA   the first cluster, for faults and checks
#   FG_STACK_DIR           the temp dir (fleetgate.log, kubesim.log...)
# SDK_READ_PER_MINUTE / SDK_READ_BURST set the read rate limit (the 429 tests lower them).
# Redis calls may take 3 s before they count as failed (default 250 ms): on a loaded machine (make
# test runs ASan builds beside) a slow call would open fleetgate's Redis circuit and fail reads.
set -euo pipefail
cd "$(dirname "$0")/../.."
FG_BUILD=${FG_BUILD:-build}
clusters=${SDK_CLUSTERS:-1}
seed_pods=${SDK_SEED_PODS:-20}
read_pm=${SDK_READ_PER_MINUTE:-6000000}
read_burst=${SDK_READ_BURST:-1000000}

tmp=$(mktemp -d /tmp/fg-sdk-stack-XXXXXX)
pids=()
cleanup() {
    local rc=$?
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    if [ "$rc" != 0 ]; then
        echo "stack.sh: fleetgate.log (last lines):" >&2; tail -5 "$tmp/fleetgate.log" >&2 || true
    fi
    if [ -n "${SDK_KEEP_LOGS:-}" ]; then echo "stack.sh: logs kept in $tmp" >&2; else rm -rf "$tmp"; fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

used=" "
free_port() { # VAR [COUNT]: COUNT consecutive free ports from a random base
    local p n=${2:-1} i ok
    while :; do
        p=$((20000 + RANDOM % 40000)); ok=1
        for ((i = 0; i < n; i++)); do
            case "$used" in *" $((p + i)) "*) ok=0 ;; esac
            (exec 3<>"/dev/tcp/127.0.0.1/$((p + i))") 2>/dev/null && ok=0
        done
        [ "$ok" = 1 ] && break
    done
    for ((i = 0; i < n; i++)); do used="$used$((p + i)) "; done
    printf -v "$1" '%s' "$p"
}
free_port redis_port; free_port ks_port "$clusters"; free_port fg_port; free_port fg_tls_port
# fleetgate's TLS listener (kubectl's surface; getKubeconfig answers only with one)
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 \
    -subj /CN=fleetgate-sdk-test -addext subjectAltName=IP:127.0.0.1,DNS:localhost \
    -keyout "$tmp/tls.key" -out "$tmp/tls.crt" 2>/dev/null

redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no --dir "$tmp" \
    >"$tmp/redis.log" 2>&1 &
pids+=($!)

ks_token=sdk-cluster-token
{
    echo '{"clusters": ['
    for ((i = 0; i < clusters; i++)); do
        [ "$i" -gt 0 ] && echo ','
        printf '{"name": "sdk-%d", "region": "r1", "zone": "zone-%d", "port": %d, "token": "%s"}' \
            "$i" "$i" $((ks_port + i)) "$ks_token"
    done
    echo ']}'
} >"$tmp/kubesim.json"
"$FG_BUILD/kubesim" --config "$tmp/kubesim.json" --token "$ks_token" --tls-dir "$tmp/tls" \
    --pod-start-ms 0 --seed-nodes 4 --seed-pods "$seed_pods" --seed-namespace demo \
    >"$tmp/kubesim.out" 2>"$tmp/kubesim.log" &
pids+=($!)
for _ in $(seq 1 600); do
    [ "$(grep -c '^cluster ' "$tmp/kubesim.out" 2>/dev/null)" = "$clusters" ] && break
    sleep 0.05
done
[ "$(grep -c '^cluster ' "$tmp/kubesim.out")" = "$clusters" ] || { cat "$tmp/kubesim.log" >&2; echo "stack.sh: kubesim did not start" >&2; exit 1; }
printf '%s\n' "$ks_token" >"$tmp/ks-token"
ca="$tmp/tls/ca.crt"
# project "demo" gets a quota in every tier (as conf/demo.sh gives it), so apps can be created
quota='{"metadata":{"annotations":{'
for tier in reserved ondemand preemptible; do
    quota+="\"fleetgate.io/quota-$tier-cpu\":\"100000\",\"fleetgate.io/quota-$tier-memory\":\"100000Gi\","
    quota+="\"fleetgate.io/quota-$tier-pods\":\"100000\","
done
quota="${quota%,}}}}"
for ((i = 0; i < clusters; i++)); do
    curl -fsS -o /dev/null --cacert "$ca" -H "Authorization: Bearer $ks_token" \
        -H 'Content-Type: application/merge-patch+json' -X PATCH \
        "https://127.0.0.1:$((ks_port + i))/api/v1/namespaces/demo" -d "$quota"
done

# tokens: the demo key pair (conf/demo-auth.sh), claims signed here with openssl
conf/demo-auth.sh "$tmp/auth" --keys-only
b64url() { openssl base64 -A | tr '+/' '-_' | tr -d '='; }
sign() {
    local header payload sig
    header=$(printf '{"alg":"RS256","typ":"JWT","kid":"demo"}' | b64url)
    payload=$(printf '%s' "$1" | b64url)
    sig=$(printf '%s.%s' "$header" "$payload" | openssl dgst -sha256 -sign "$tmp/auth/jwt-private.pem" -binary | b64url)
    printf '%s.%s.%s' "$header" "$payload" "$sig"
}
claims() { # SUB EXP_OFFSET EXTRA
    local now; now=$(date +%s)
    printf '{"sub":"%s","iss":"fleetgate-demo","aud":"fleetgate","iat":%d,"nbf":%d,"exp":%d,%s}' \
        "$1" "$now" $((now - 5)) $((now + $2)) "$3"
}
export FG_TOKEN_ADMIN FG_TOKEN_OPERATOR FG_TOKEN_VIEWER FG_TOKEN_OTHER FG_TOKEN_EXPIRED FG_TOKEN_CMD
FG_TOKEN_ADMIN=$(sign "$(claims sdk-admin 3600 '"groups":["fleetgate-admins"]')")
FG_TOKEN_OPERATOR=$(sign "$(claims sdk-operator 3600 '"projects":{"demo":"operator"}')")
FG_TOKEN_VIEWER=$(sign "$(claims sdk-viewer 3600 '"projects":{"demo":"viewer"}')")
FG_TOKEN_OTHER=$(sign "$(claims sdk-other 3600 '"projects":{"other":"developer"}')")
FG_TOKEN_EXPIRED=$(sign "$(claims sdk-admin -60 '"groups":["fleetgate-admins"]')")
cat >"$tmp/token-cmd.sh" <<SH
#!/usr/bin/env bash
set -euo pipefail
$(declare -f b64url sign claims)
tmp='$tmp'
sign "\$(claims sdk-admin 3600 '"groups":["fleetgate-admins"]')"
SH
chmod 700 "$tmp/token-cmd.sh"
FG_TOKEN_CMD="$tmp/token-cmd.sh"

ks_list=""
for ((i = 0; i < clusters; i++)); do
    [ "$i" -gt 0 ] && ks_list+=", "
    ks_list+="{\"name\": \"sdk-$i\", \"region\": \"r1\", \"zone\": \"zone-$i\", \"url\": \"https://127.0.0.1:$((ks_port + i))\","
    ks_list+=" \"token_file\": \"$tmp/ks-token\", \"ca_file\": \"$ca\"}"
done
start_fleetgate() {
cat >"$tmp/fleetgate.json" <<JSON
{"listen": "127.0.0.1:$fg_port", "workers": 4,
 "tls": {"listen": "127.0.0.1:$fg_tls_port", "cert_file": "$tmp/tls.crt", "key_file": "$tmp/tls.key",
         "ca_file": "$tmp/tls.crt"},
 "limits": {"max_connections": 2048, "max_connections_per_client": 2048},
 "redis": {"url": "redis://127.0.0.1:$redis_port/0", "timeout_ms": 3000},
 "log": {"level": "warn", "access_log": false},
 "openapi_file": "api/openapi.yaml", "docs_file": "build/docs/index.html",
 "clusters": [$ks_list],
 "auth": {"issuer": "fleetgate-demo", "audience": "fleetgate",
          "keys": [{"kid": "demo", "pem_file": "$tmp/auth/jwt-public.pem", "algs": ["RS256"]}],
          "audit_log": "$tmp/audit.log"},
 "rate_limits": {"streams_per_principal": 64, "read_per_minute": $read_pm, "read_burst": $read_burst,
                 "project_read_per_minute": 60000000, "project_read_burst": 1000000,
                 "write_per_minute": 60000, "write_burst": 10000}}
JSON
"$FG_BUILD/fleetgate" -c "$tmp/fleetgate.json" 2>"$tmp/fleetgate.log" &
fg_pid=$!
pids+=($fg_pid)
export FLEETGATE_URL="http://127.0.0.1:$fg_port"
for _ in $(seq 1 200); do
    kill -0 "$fg_pid" 2>/dev/null || break
    curl -fsS -o /dev/null "$FLEETGATE_URL/healthz" 2>/dev/null && break
    sleep 0.05
done
kill -0 "$fg_pid" 2>/dev/null && curl -fsS -o /dev/null "$FLEETGATE_URL/healthz" 2>/dev/null
}
# The port was free when picked, but a busy machine may take it first: then another one.
for attempt in 1 2 3 4 5; do
    start_fleetgate && break
    [ "$attempt" = 5 ] && { cat "$tmp/fleetgate.log" >&2; echo "stack.sh: fleetgate did not start" >&2; exit 1; }
    free_port fg_port; free_port fg_tls_port
done
# ready when every cluster's pods are in the cache: the list is complete (no cluster missing)
want=$((seed_pods * clusters))
for _ in $(seq 1 1200); do
    n=$(curl -sS -H "Authorization: Bearer $FG_TOKEN_ADMIN" "$FLEETGATE_URL/readyz" -o /dev/null -w '%{http_code}' 2>/dev/null || true)
    [ "$n" = 200 ] && break
    kill -0 "$fg_pid" 2>/dev/null || { cat "$tmp/fleetgate.log" >&2; exit 1; }
    sleep 0.05
done
export FG_KUBESIM_URL="https://127.0.0.1:$ks_port" FG_KUBESIM_TOKEN="$ks_token" FG_KUBESIM_CA="$ca"
export FG_STACK_DIR="$tmp" FG_SEED_PODS="$want"
"$@"
