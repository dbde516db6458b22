#!/usr/bin/env bash
# kubectl through fleetgate (issue 15): the real kubectl on this machine, pointed at fleetgate's
# TLS listener by the kubeconfig fleetgate hands out, against kubesim with two member clusters.
# fleetgate runs with its informers (the pods kubectl lists come from the cache), a private
# redis-server, JWTs signed here with the openssl CLI and a TLS certificate made here too.
#   FLEETGATE=build/fleetgate KUBESIM=build/kubesim tests/integration/kubectl_fleetgate.sh
# Prints "N passed, M failed"; exits non-zero when a check fails, kubectl is missing, or the
# daemon does not exit 0 on SIGTERM (under ASan that includes leaks).
set -u
FLEETGATE=${FLEETGATE:-build/fleetgate}
KUBESIM=${KUBESIM:-build/kubesim}
pass=0
fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; [ -n "${2:-}" ] && echo "$2" | head -20 | sed 's/^/     /'; }

if ! command -v kubectl >/dev/null 2>&1; then
    echo "kubectl_fleetgate: kubectl is not installed on this machine; this suite needs it"
    echo "0 passed, 1 failed"
    exit 1
fi

tmp=$(mktemp -d /tmp/fg-kubectl-XXXXXX)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
    rm -rf "$tmp"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
umask 077

# ---- tokens: RS256 JWTs over a key made here ---------------------------------------------
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$tmp/jwt.key" 2>/dev/null
openssl pkey -in "$tmp/jwt.key" -pubout -out "$tmp/jwt.pub"
b64url() { openssl base64 -A | tr '+/' '-_' | tr -d '='; }
sign() {
    local h p s
    h=$(printf '{"alg":"RS256","typ":"JWT","kid":"k1"}' | b64url)
    p=$(printf '%s' "$1" | b64url)
    s=$(printf '%s.%s' "$h" "$p" | openssl dgst -sha256 -sign "$tmp/jwt.key" -binary | b64url)
    printf '%s.%s.%s' "$h" "$p" "$s"
}
now=$(date +%s)
claims() { printf '{"iss":"https://id.test","aud":"fleetgate","sub":"%s","exp":%d,"projects":%s}' "$1" $((now + 3600)) "$2"; }
DEV=$(sign "$(claims dana '{"demo":"developer"}')")
OP=$(sign "$(claims olga '{"demo":"operator"}')")
OTHER=$(sign "$(claims omar '{"other":"operator"}')")

# ---- fleetgate's TLS certificate (its own CA: the kubeconfig carries it) -----------------
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 \
    -subj /CN=fleetgate-test -addext subjectAltName=IP:127.0.0.1,DNS:localhost \
    -keyout "$tmp/tls.key" -out "$tmp/tls.crt" 2>/dev/null

# ---- redis and kubesim ---------------------------------------------------------------------
rport=$(free_port)
redis-server --port "$rport" --bind 127.0.0.1 --save '' --appendonly no >"$tmp/redis.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do redis-cli -p "$rport" ping >/dev/null 2>&1 && break; sleep 0.05; done

ks_port=""
for _ in 1 2 3 4 5; do
    cand=$(free_port)
    "$KUBESIM" --clusters 2 --base-port "$cand" --token ks-token --tls-dir "$tmp/ks-tls" \
        --pod-start-ms 100 --log-lines-per-second 5 >"$tmp/ks.out" 2>"$tmp/ks.err" &
    kpid=$!
    for _ in $(seq 50); do [ "$(grep -c "url https://" "$tmp/ks.out" 2>/dev/null)" = 2 ] && break; sleep 0.1; done
    if [ "$(grep -c "url https://" "$tmp/ks.out")" = 2 ]; then ks_port=$cand; pids+=($kpid); break; fi
    kill "$kpid" 2>/dev/null; wait "$kpid" 2>/dev/null
done
if [ -z "$ks_port" ]; then echo "kubesim did not start: $(cat "$tmp/ks.err")"; echo "0 passed, 1 failed"; exit 1; fi
echo ks-token >"$tmp/ks-token"
KS=(curl -sS -o /dev/null --cacert "$tmp/ks-tls/ca.crt" -H "Authorization: Bearer ks-token"
    -H 'Content-Type: application/json')
for i in 0 1; do
    for ns in demo other; do
        "${KS[@]}" -X POST "https://127.0.0.1:$((ks_port + i))/api/v1/namespaces" \
            -d "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"$ns\"}}"
    done
done
# two pods of app web in the first cluster (one with two containers), one in the second
pod() {
    "${KS[@]}" -X POST "https://127.0.0.1:$((ks_port + $1))/api/v1/namespaces/$2/pods" \
        -d "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"$3\",\"labels\":{\"app\":\"web\"}},
             \"spec\":{\"containers\":[{\"name\":\"main\",\"image\":\"busybox:1.36\"}$4]}}"
}
pod 0 demo web-1 ""
pod 0 demo web-2 ',{"name":"side","image":"envoy:1"}'
pod 1 demo api-1 ""
pod 0 other secret-1 ""

# ---- fleetgate -------------------------------------------------------------------------------
port=$(free_port)
tport=$(free_port)
cat >"$tmp/fleetgate.json" <<EOF
{"listen": "127.0.0.1:$port", "workers": 2,
 "redis": {"url": "redis://127.0.0.1:$rport/0"},
 "log": {"level": "warn", "access_log": false},
 "openapi_file": "api/openapi.yaml", "docs_file": "/nonexistent",
 "tls": {"listen": "127.0.0.1:$tport", "cert_file": "$tmp/tls.crt", "key_file": "$tmp/tls.key",
         "ca_file": "$tmp/tls.crt"},
 "clusters": [
  {"name": "east-a", "zone": "za", "region": "r", "url": "https://127.0.0.1:$ks_port",
   "token_file": "$tmp/ks-token", "ca_file": "$tmp/ks-tls/ca.crt"},
  {"name": "west-b", "zone": "zb", "region": "r", "url": "https://127.0.0.1:$((ks_port + 1))",
   "token_file": "$tmp/ks-token", "ca_file": "$tmp/ks-tls/ca.crt"}],
 "auth": {"issuer": "https://id.test", "audience": "fleetgate",
          "keys": [{"kid": "k1", "pem_file": "$tmp/jwt.pub", "algs": ["RS256"]}],
          "audit_log": "$tmp/audit.log"},
 "rate_limits": {"redis_timeout_ms": 2000}}
EOF
"$FLEETGATE" -c "$tmp/fleetgate.json" 2>"$tmp/fleetgate.log" &
fpid=$!
pids+=($fpid)
H=(-H "Authorization: Bearer $DEV")
for _ in $(seq 150); do
    n=$(curl -s "${H[@]}" "http://127.0.0.1:$port/v1/projects/demo/pods" | grep -o '"name":"\(web-1\|web-2\|api-1\)"' | wc -l)
    [ "$n" = 3 ] && break
    sleep 0.1
done
[ "$n" = 3 ] || { bad "fleetgate caches the pods" "$(tail -5 "$tmp/fleetgate.log")"; }

# ---- the kubeconfig ----------------------------------------------------------------------------
code=$(curl -s -o "$tmp/kubeconfig" -w '%{http_code}' --cacert "$tmp/tls.crt" "${H[@]}" \
       "https://127.0.0.1:$tport/v1/projects/demo/kubeconfig")
ctx=$(KUBECONFIG="$tmp/kubeconfig" kubectl config get-contexts -o name 2>&1 | tr '\n' ' ')
cur=$(KUBECONFIG="$tmp/kubeconfig" kubectl config current-context 2>&1)
if [ "$code" = 200 ] && [ "$ctx" = "demo@east-a demo@west-b " ] && [ "$cur" = "demo@east-a" ] &&
   ! grep -q "$DEV" "$tmp/kubeconfig"; then
    ok "kubeconfig over HTTPS: a context per member cluster, no token in it"
else bad "kubeconfig over HTTPS" "$code / $ctx / $cur / $(cat "$tmp/kubeconfig")"; fi

code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $OTHER" \
       "http://127.0.0.1:$port/v1/projects/demo/kubeconfig")
if [ "$code" = 403 ]; then ok "kubeconfig of another project: 403"; else bad "kubeconfig of another project: 403" "$code"; fi

# answers checked against api/openapi.yaml (tests/contract/validate.mjs)
contract() { # METHOD PATH TOKEN [ACCEPT]: the answer of fleetgate's TLS listener matches the contract
    local hdr=(-H "Authorization: Bearer $3")
    [ -n "${4:-}" ] && hdr+=(-H "Accept: $4")
    local st
    st=$(curl -s -D "$tmp/c.h" -o "$tmp/c.b" -w '%{http_code}' --cacert "$tmp/tls.crt" -X "$1" "${hdr[@]}" "https://127.0.0.1:$tport$2")
    node tests/contract/validate.mjs --method "$1" --path "${2%%\?*}" --status "$st" --headers "$(cat "$tmp/c.h")" <"$tmp/c.b" 2>&1 &&
        echo "$st"
}
miss=""
TABLE='application/json;as=Table;v=v1;g=meta.k8s.io,application/json'
for c in "GET /v1/projects/demo/kubeconfig $DEV 200" "GET /v1/projects/demo/kubeconfig?embedToken=true $DEV 200" \
         "GET /k8s/east-a/api $DEV 200" "GET /k8s/east-a/apis $DEV 200" "GET /k8s/east-a/api/v1 $DEV 200" \
         "GET /k8s/east-a/version $DEV 200" "GET /k8s/east-a/api/v1/namespaces/demo $DEV 200" \
         "GET /k8s/east-a/api/v1/namespaces/demo/pods $DEV 200" "GET /k8s/east-a/api/v1/namespaces/demo/pods/web-1 $DEV 200" \
         "GET /k8s/east-a/api/v1/namespaces/demo/pods $OTHER 403" "GET /k8s/nowhere/api $DEV 404" \
         "GET /k8s/east-a/api/v1/namespaces/demo/pods/nope $DEV 404" "POST /k8s/east-a/api/v1/namespaces/demo/pods/web-1/exec $OP 400" \
         "GET /k8s/east-a/api/v1/namespaces/demo/pods?labelSelector=a%3D%3D%3D $DEV 422"; do
    set -- $c
    got=$(contract "$1" "$2" "$3")
    [ "$(echo "$got" | tail -1)" = "$4" ] || miss="$miss
$1 $2 ($4): $got"
done
got=$(contract GET /k8s/east-a/api/v1/namespaces/demo/pods "$DEV" "$TABLE")
[ "$(echo "$got" | tail -1)" = 200 ] || miss="$miss
Table: $got"
if [ -z "$miss" ]; then ok "answers match the contract (kubeconfig, discovery, pods, Status errors)"
else bad "answers match the contract" "$miss"; fi
curl -s --cacert "$tmp/tls.crt" -H "Authorization: Bearer $DEV" -o "$tmp/kc-embed" \
    "https://127.0.0.1:$tport/v1/projects/demo/kubeconfig?embedToken=true"
out=$(KUBECONFIG="$tmp/kc-embed" kubectl get pods -o name 2>&1 | sort | tr '\n' ' ')
if [ "$out" = "pod/web-1 pod/web-2 " ]; then ok "embedToken=true: the kubeconfig alone is enough"; else bad "embedToken=true" "$out"; fi

K=(kubectl --kubeconfig "$tmp/kubeconfig" --request-timeout 15s)
KD=("${K[@]}" --token "$DEV")
KO=("${K[@]}" --token "$OP")
KX=("${K[@]}" --token "$OTHER")

# ---- get pods ----------------------------------------------------------------------------------
out=$("${KD[@]}" get pods 2>&1)
if echo "$out" | head -1 | grep -qE "^NAME +READY +STATUS +RESTARTS +AGE$" &&
   echo "$out" | grep -qE "^web-1 +[01]/1 +(Pending|Running) +0 +[0-9]+s$" &&
   echo "$out" | grep -qE "^web-2 +[0-2]/2 " && ! echo "$out" | grep -q "api-1" &&
   [ "$(echo "$out" | wc -l)" = 3 ]; then ok "get pods (east-a's pods of demo, as a Table)"
else bad "get pods" "$out"; fi

out=$("${KD[@]}" --context demo@west-b get pods -o name 2>&1)
if [ "$out" = "pod/api-1" ]; then ok "get pods in the other context (west-b)"; else bad "get pods --context demo@west-b" "$out"; fi

out=$("${KD[@]}" get pod web-2 -o jsonpath='{.metadata.namespace} {.spec.containers[*].name} {.metadata.annotations.fleetgate\.io/cluster}' 2>&1)
if [ "$out" = "demo main side east-a" ]; then ok "get pod -o jsonpath (a core/v1 Pod from the cache)"
else bad "get pod -o jsonpath" "$out"; fi

out=$("${KD[@]}" get pods -l app=web -o wide 2>&1)
if echo "$out" | head -1 | grep -qE "^NAME +READY +STATUS +RESTARTS +AGE +IP +NODE +NOMINATED NODE +READINESS GATES$"; then
    ok "get pods -l app=web -o wide"
else bad "get pods -o wide" "$out"; fi

out=$("${KD[@]}" get pod nope 2>&1)
if echo "$out" | grep -q 'Error from server (NotFound): pods "nope" not found'; then ok "get of a missing pod: NotFound Status"
else bad "get of a missing pod" "$out"; fi

out=$("${KX[@]}" get pods 2>&1)
rc=$?
if [ "$rc" != 0 ] && echo "$out" | grep -q "Error from server (Forbidden)"; then ok "get pods with another project's token: Forbidden"
else bad "get pods with another project's token" "$out"; fi

out=$("${KX[@]}" -n other get pods 2>&1)
if echo "$out" | grep -q "^secret-1 "; then ok "that token sees its own project (-n other)"
else bad "-n other with its own token" "$out"; fi

out=$("${K[@]}" --token not-a-jwt get pods 2>&1)
if echo "$out" | grep -q "You must be logged in to the server (the token is not a JWS"; then ok "a bad token: Unauthorized, with fleetgate's reason"; else bad "a bad token" "$out"; fi

# ---- logs ------------------------------------------------------------------------------------
sleep 1
out=$("${KD[@]}" logs web-1 2>&1)
if [ -n "$out" ] && echo "$out" | grep -q 'msg='; then ok "logs"; else bad "logs" "$out"; fi

out=$("${KD[@]}" logs web-2 -c side --tail 1 --timestamps 2>&1)
if [ "$(echo "$out" | wc -l)" = 1 ] && echo "$out" | grep -qE '^[0-9-]+T[0-9:.]+Z '; then ok "logs -c side --tail 1 --timestamps"
else bad "logs -c --tail --timestamps" "$out"; fi

out=$(timeout 3 "${KD[@]}" logs -f web-1 --tail 1 2>&1)
if [ "$(echo "$out" | grep -c 'msg=')" -ge 5 ]; then ok "logs -f sees new lines"; else bad "logs -f sees new lines" "$out"; fi

out=$("${KX[@]}" logs web-1 2>&1)
if echo "$out" | grep -q "Forbidden"; then ok "logs with another project's token: Forbidden"; else bad "logs with another project's token" "$out"; fi

# ---- exec --------------------------------------------------------------------------------------
out=$(timeout 20 "${KO[@]}" exec web-1 -- sh -c 'echo hi; exit 3' 2>&1)
rc=$?
if [ "$rc" = 3 ] && echo "$out" | grep -q '^hi$'; then ok "exec: stdout and exit status 3"
else bad "exec exit status 3 (rc $rc)" "$out"; fi

out=$(echo hello-stdin | timeout 20 "${KO[@]}" exec -i web-2 -c side -- cat 2>&1)
rc=$?
if [ "$rc" = 0 ] && [ "$out" = "hello-stdin" ]; then ok "exec -i (stdin through, then closed)"
else bad "exec -i (rc $rc)" "$out"; fi

# -it under a pseudo-terminal (script(1)): the terminal's size reaches the process (resize).
# kubectl sends the size once the session is open, so the process may start before it (as on a
# real kubelet): it waits for a size, up to 5 s, instead of racing it.
out=$(cd "$tmp" && COLUMNS=100 LINES=30 timeout 20 script -qec "stty cols 100 rows 30; kubectl --kubeconfig $tmp/kubeconfig --token $OP exec -it web-1 -- sh -c 'i=0; while [ \"\$(stty size)\" = \"0 0\" ] && [ \$i -lt 50 ]; do sleep 0.1; i=\$((i+1)); done; stty size; exit 0'" /dev/null 2>&1 | tr -d '\r')
if echo "$out" | grep -q '30 100$'; then ok "exec -it (a tty, its size passed on)"
else bad "exec -it" "$out"; fi

out=$(timeout 20 "${KO[@]}" --context demo@west-b exec api-1 -- sh -c 'echo west' 2>&1)
if [ "$out" = "west" ]; then ok "exec in the other context"; else bad "exec in the other context" "$out"; fi

out=$(timeout 20 "${KX[@]}" exec web-1 -- true 2>&1)
rc=$?
if [ "$rc" != 0 ] && echo "$out" | grep -qi "forbidden"; then ok "exec with another project's token: Forbidden"
else bad "exec with another project's token (rc $rc)" "$out"; fi

out=$(timeout 20 "${KD[@]}" exec web-1 -- true 2>&1)
rc=$?
if [ "$rc" != 0 ] && echo "$out" | grep -qi "forbidden"; then ok "exec with a developer's token: Forbidden (exec needs operator)"
else bad "exec with a developer's token (rc $rc)" "$out"; fi

if [ "$(grep -c '"kind":"exec"' "$tmp/audit.log")" -ge 3 ]; then ok "audit lines for the exec sessions"
else bad "audit lines for the exec sessions" "$(tail -3 "$tmp/audit.log")"; fi

# ---- the end -----------------------------------------------------------------------------------
kill -TERM "$fpid"
rc=0
wait "$fpid" || rc=$?
if [ "$rc" = 0 ]; then ok "fleetgate exits 0 on SIGTERM"; else bad "fleetgate exits 0 on SIGTERM (rc $rc)" "$(tail -20 "$tmp/fleetgate.log")"; fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
