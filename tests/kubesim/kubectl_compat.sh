#!/usr/bin/env bash
# kubectl compatibility suite: starts build/kubesim on free ports with a temporary TLS directory
# and drives it with the real kubectl (verifying the generated CA, sending the bearer token).
# Prints "N passed, M failed"; exits non-zero when any check fails or kubectl is missing.
set -u
KUBESIM=${KUBESIM:-build/kubesim}
pass=0
fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; [ -n "${2:-}" ] && echo "$2" | head -20 | sed 's/^/     /'; }

if ! command -v kubectl >/dev/null 2>&1; then
    echo "kubectl_compat: kubectl is not installed on this machine; this suite needs it"
    echo "0 passed, 1 failed"
    exit 1
fi

tmp=$(mktemp -d /tmp/kubesim-compat-XXXXXX)
pid=""
cleanup() {
    [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT

# a free port pair: ask the kernel for one, try the next if taken
port=""
for _ in 1 2 3 4 5; do
    cand=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    "$KUBESIM" --clusters 1 --base-port "$cand" --token compat-token --tls-dir "$tmp/tls" \
        --bookmark-interval-ms 500 --pod-start-ms 200 --job-run-ms 500 \
        --log-lines-per-second 5 >"$tmp/out" 2>"$tmp/err" &
    pid=$!
    for _ in $(seq 50); do grep -q "url https://" "$tmp/out" 2>/dev/null && break; sleep 0.1; done
    if grep -q "url https://" "$tmp/out"; then port=$cand; break; fi
    kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; pid=""
done
if [ -z "$port" ]; then
    echo "kubectl_compat: kubesim did not start: $(cat "$tmp/err")"
    echo "0 passed, 1 failed"
    exit 1
fi
K=(kubectl --server "https://127.0.0.1:$port" --certificate-authority "$tmp/tls/ca.crt"
   --token compat-token --request-timeout 10s)

cat >"$tmp/pod.yaml" <<'YAML'
apiVersion: v1
kind: Pod
metadata: {name: p1, namespace: default, labels: {app: demo}}
spec:
  containers: [{name: main, image: "busybox:1.36"}]
YAML
cat >"$tmp/dep.yaml" <<'YAML'
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default, labels: {app: web}}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: nginx
        image: "nginx:1.25"
        env: [{name: MODE, value: prod}]
YAML

out=$("${K[@]}" api-resources 2>&1)
if echo "$out" | grep -q "deployments.*deploy.*apps/v1.*true.*Deployment" &&
   echo "$out" | grep -q "horizontalpodautoscalers.*hpa.*autoscaling/v2"; then ok "api-resources"
else bad "api-resources" "$out"; fi

out=$("${K[@]}" api-versions 2>&1)
if echo "$out" | grep -qx "autoscaling/v1" && echo "$out" | grep -qx "autoscaling/v2"; then ok "api-versions lists autoscaling/v1 and v2"
else bad "api-versions lists autoscaling/v1 and v2" "$out"; fi

out=$("${K[@]}" get namespaces 2>&1)
if echo "$out" | grep -q "^kube-system"; then ok "get namespaces"; else bad "get namespaces" "$out"; fi

out=$(kubectl --server "https://127.0.0.1:$port" --certificate-authority "$tmp/tls/ca.crt" \
      --token wrong get pods 2>&1)
if echo "$out" | grep -qi "unauthorized"; then ok "wrong token is refused"; else bad "wrong token is refused" "$out"; fi

out=$("${K[@]}" create -f "$tmp/pod.yaml" 2>&1)
if [ "$out" = "pod/p1 created" ]; then ok "create -f"; else bad "create -f" "$out"; fi

out=$("${K[@]}" create -f "$tmp/pod.yaml" 2>&1)
if echo "$out" | grep -q 'AlreadyExists.*pods "p1" already exists'; then ok "create twice is AlreadyExists"
else bad "create twice is AlreadyExists" "$out"; fi

out=$("${K[@]}" get pods 2>&1)
if echo "$out" | grep -q "^p1 "; then ok "get"; else bad "get" "$out"; fi

# server-side printing: the columns of the Table a real server sends
out=$("${K[@]}" get pods 2>&1)
if echo "$out" | head -1 | grep -qE "^NAME +READY +STATUS +RESTARTS +AGE$" &&
   echo "$out" | grep -qE "^p1 +[01]/1 +(Pending|Running) +0 +[0-9]+s$"; then ok "get pods prints the Table's columns"
else bad "get pods prints the Table's columns" "$out"; fi

out=$("${K[@]}" get pod p1 -o json 2>&1)
if echo "$out" | grep -q '"kind": "Pod"' && echo "$out" | grep -q '"uid":' &&
   echo "$out" | grep -q '"resourceVersion":'; then ok "get -o json"; else bad "get -o json" "$out"; fi

out=$("${K[@]}" get pod p1 -o json --show-managed-fields 2>&1)
if echo "$out" | grep -q '"manager": "kubectl-create"'; then ok "managedFields carry the kubectl manager"
else bad "managedFields carry the kubectl manager" "$out"; fi

out=$("${K[@]}" apply -f "$tmp/dep.yaml" 2>&1)
if [ "$out" = "deployment.apps/web created" ]; then ok "apply -f (create)"; else bad "apply -f (create)" "$out"; fi
sed -i 's/nginx:1.25/nginx:1.26/' "$tmp/dep.yaml"
out=$("${K[@]}" apply -f "$tmp/dep.yaml" 2>&1)
img=$("${K[@]}" get deploy web -o jsonpath='{.spec.template.spec.containers[0].image} {.metadata.generation}' 2>&1)
if [ "$out" = "deployment.apps/web configured" ] && [ "$img" = "nginx:1.26 2" ]; then ok "apply -f (change)"
else bad "apply -f (change)" "$out / $img"; fi

out=$("${K[@]}" scale deployment web --replicas=5 2>&1)
rep=$("${K[@]}" get deploy web -o jsonpath='{.spec.replicas}' 2>&1)
if [ "$out" = "deployment.apps/web scaled" ] && [ "$rep" = "5" ]; then ok "scale"; else bad "scale" "$out / $rep"; fi

out=$("${K[@]}" label pod p1 tier=frontend 2>&1)
sel=$("${K[@]}" get pods -l 'tier in (frontend),app=demo' -o name 2>&1)
if [ "$out" = "pod/p1 labeled" ] && [ "$sel" = "pod/p1" ]; then ok "label + get -l"; else bad "label + get -l" "$out / $sel"; fi

# get -w: a change made while watching shows up; the watch is bounded by timeout
( timeout 4 "${K[@]}" get pods -w --output-watch-events >"$tmp/watch" 2>&1 ) &
wpid=$!
sleep 1.5
"${K[@]}" label pod p1 watched=yes >/dev/null 2>&1
"${K[@]}" create -f - >/dev/null 2>&1 <<'YAML'
apiVersion: v1
kind: Pod
metadata: {name: p2, namespace: default}
spec: {containers: [{name: c, image: "busybox:1.36"}]}
YAML
wait "$wpid"
if grep -q "^ADDED *p1" "$tmp/watch" && grep -q "^MODIFIED *p1" "$tmp/watch" &&
   grep -q "^ADDED *p2" "$tmp/watch"; then ok "get -w"; else bad "get -w" "$(cat "$tmp/watch")"; fi

out=$("${K[@]}" delete deployment web 2>&1)
gone=$("${K[@]}" get deployment web 2>&1)
if [ "$out" = 'deployment.apps "web" deleted' ] && echo "$gone" | grep -q "NotFound"; then ok "delete"
else bad "delete" "$out / $gone"; fi
# the Deployment's ReplicaSets and pods go with it (background propagation)
for _ in $(seq 50); do [ -z "$("${K[@]}" get pods -l app=web -o name 2>&1)" ] && break; sleep 0.1; done


for i in $(seq 3 9); do
    sed "s/name: p1/name: p$i/" "$tmp/pod.yaml" | "${K[@]}" create -f - >/dev/null 2>&1
done
out=$("${K[@]}" get pods --chunk-size=2 -v=6 2>&1)
pages=$(echo "$out" | grep -c "pods?.*limit=2")
rows=$(echo "$out" | grep -c "^p[0-9] ")
if [ "$pages" = "5" ] && [ "$rows" = "9" ]; then ok "get --chunk-size"
else bad "get --chunk-size (pages $pages rows $rows)" "$out"; fi

out=$("${K[@]}" get --raw '/api/v1/pods?watch=1&resourceVersion=1&timeoutSeconds=2' 2>&1 | head -1)
if echo "$out" | grep -q '"type":"ADDED"'; then ok "raw watch from an RV in history"; else bad "raw watch from an RV in history" "$out"; fi


# ---- part 2: a living cluster -------------------------------------------------------
cat >"$tmp/live.yaml" <<'YAML'
apiVersion: apps/v1
kind: Deployment
metadata: {name: live, namespace: default}
spec:
  replicas: 2
  selector: {matchLabels: {app: live}}
  template:
    metadata: {labels: {app: live}}
    spec:
      containers:
      - {name: app, image: "nginx:1.25", resources: {requests: {cpu: 100m, memory: 64Mi}}}
YAML
"${K[@]}" apply -f "$tmp/live.yaml" >/dev/null 2>&1
out=$(timeout 30 "${K[@]}" rollout status deployment/live --timeout 25s 2>&1)
if echo "$out" | grep -q 'deployment "live" successfully rolled out'; then ok "rollout status (Deployment reaches Ready)"
else bad "rollout status (Deployment reaches Ready)" "$out"; fi

"${K[@]}" set image deployment/live app=nginx:1.26 >/dev/null 2>&1
out=$(timeout 30 "${K[@]}" rollout status deployment/live --timeout 25s 2>&1)
rs=$("${K[@]}" get rs -l app=live -o jsonpath='{range .items[*]}{.spec.replicas} {end}' 2>&1)
if echo "$out" | grep -q 'successfully rolled out' && [ "$rs" = "0 2 " -o "$rs" = "2 0 " ]; then
    ok "rollout status after set image (new ReplicaSet, old scaled to 0)"
else bad "rollout status after set image" "$out / rs: $rs"; fi

pod=$("${K[@]}" get pods -l app=live --field-selector status.phase=Running -o jsonpath='{.items[0].metadata.name}' 2>&1)
out=$("${K[@]}" logs "$pod" 2>&1)
if echo "$out" | grep -q 'msg="starting"'; then ok "logs"; else bad "logs" "$pod: $out"; fi

out=$("${K[@]}" logs "$pod" --tail 1 --timestamps 2>&1)
if [ "$(echo "$out" | wc -l)" = "1" ] && echo "$out" | grep -qE '^[0-9-]+T[0-9:.]+Z level='; then ok "logs --tail --timestamps"
else bad "logs --tail --timestamps" "$out"; fi

out=$(timeout 3 "${K[@]}" logs -f "$pod" --tail 1 2>&1)
if [ "$(echo "$out" | grep -c 'msg=')" -ge 5 ]; then ok "logs -f streams new lines"; else bad "logs -f streams new lines" "$out"; fi

out=$(timeout 15 "${K[@]}" exec "$pod" -- sh -c 'echo hi; exit 3' 2>&1)
rc=$?
if [ "$rc" = "3" ] && echo "$out" | grep -q '^hi$'; then ok "exec exit status 3 comes back"
else bad "exec exit status 3 comes back (rc $rc)" "$out"; fi

out=$(echo hello-stdin | timeout 15 "${K[@]}" exec -i "$pod" -- cat 2>&1)
rc=$?
if [ "$rc" = "0" ] && [ "$out" = "hello-stdin" ]; then ok "exec -i (stdin, close signal)"
else bad "exec -i (rc $rc)" "$out"; fi

# (kubectl create job sends protobuf, which kubesim does not speak; apply sends JSON)
"${K[@]}" apply -f - >/dev/null 2>&1 <<'YAML'
apiVersion: batch/v1
kind: Job
metadata: {name: once, namespace: default}
spec:
  completions: 2
  parallelism: 2
  template:
    spec:
      restartPolicy: Never
      containers: [{name: once, image: "busybox:1.36", command: ["true"]}]
YAML
out=$(timeout 20 "${K[@]}" wait --for=condition=complete job/once --timeout 15s 2>&1)
if echo "$out" | grep -q "condition met"; then ok "job runs to completion"; else bad "job runs to completion" "$out"; fi

out=$("${K[@]}" get pods -l app=live -o wide 2>&1)
if echo "$out" | head -1 | grep -qE "^NAME +READY +STATUS +RESTARTS +AGE +IP +NODE +NOMINATED NODE +READINESS GATES$" &&
   echo "$out" | grep -qE "^live-[a-z0-9]+-[a-z0-9]+ +1/1 +Running +0 +[0-9]+[smh]+ +10\.244\.[0-9.]+ +cluster-1-worker-[0-9]+ "; then
    ok "get pods -o wide prints IP and NODE"
else bad "get pods -o wide prints IP and NODE" "$out"; fi

out=$("${K[@]}" get events 2>&1)
if echo "$out" | head -1 | grep -qE "^LAST SEEN +TYPE +REASON +OBJECT +MESSAGE$" &&
   echo "$out" | grep -qE "Normal +Scheduled +pod/live-[a-z0-9-]+ +Successfully assigned"; then
    ok "get events prints LAST SEEN, TYPE, REASON, OBJECT, MESSAGE"
else bad "get events prints LAST SEEN, TYPE, REASON, OBJECT, MESSAGE" "$(echo "$out" | head -5)"; fi

out=$("${K[@]}" get deploy live 2>&1)
if echo "$out" | grep -qE "^live +2/2 +2 +2 +[0-9]+"; then ok "get deploy prints READY UP-TO-DATE AVAILABLE"
else bad "get deploy prints READY UP-TO-DATE AVAILABLE" "$out"; fi

out=$("${K[@]}" describe pod "$pod" 2>&1)
if echo "$out" | grep -qE "Normal +Scheduled +[0-9a-z]+ +default-scheduler +Successfully assigned default/$pod" &&
   echo "$out" | grep -qE "Normal +Started +"; then ok "describe pod shows its events"
else bad "describe pod shows its events" "$(echo "$out" | tail -8)"; fi

out=$("${K[@]}" events --for deploy/live 2>&1)
if echo "$out" | grep -q "ScalingReplicaSet" && ! echo "$out" | grep -q "Scheduled"; then ok "events --for deploy/live"
else bad "events --for deploy/live" "$out"; fi

# rollout undo brings the first template back on its own ReplicaSet (no third one), revision 3
"${K[@]}" rollout undo deployment/live >/dev/null 2>&1
out=$(timeout 30 "${K[@]}" rollout status deployment/live --timeout 25s 2>&1)
rs=$("${K[@]}" get rs -l app=live -o jsonpath='{range .items[*]}{.metadata.annotations.deployment\.kubernetes\.io/revision}:{.spec.replicas} {end}' 2>&1)
rev=$("${K[@]}" get deploy live -o jsonpath='{.metadata.annotations.deployment\.kubernetes\.io/revision} {.spec.template.spec.containers[0].image}' 2>&1)
if echo "$out" | grep -q 'successfully rolled out' && [ "$(echo $rs | wc -w)" = "2" ] &&
   echo " $rs" | grep -q " 3:2" && echo " $rs" | grep -q " 2:0" && [ "$rev" = "3 nginx:1.25" ]; then
    ok "rollout undo reuses the old ReplicaSet (revision 3)"
else bad "rollout undo reuses the old ReplicaSet" "$out / rs: $rs / deploy: $rev"; fi

out=$("${K[@]}" scale deployment live --current-replicas=2 --replicas=3 2>&1)
out2=$("${K[@]}" scale deployment live --current-replicas=2 --replicas=4 2>&1)
rep=$("${K[@]}" get deploy live -o jsonpath='{.spec.replicas}' 2>&1)
if [ "$out" = "deployment.apps/live scaled" ] && echo "$out2" | grep -q "Expected replicas to be 2, was 3" &&
   [ "$rep" = "3" ]; then ok "scale --current-replicas (PUT of a Scale, precondition)"
else bad "scale --current-replicas" "$out / $out2 / $rep"; fi

# what kubesim cannot decode it says so truthfully (kubectl create deployment sends protobuf)
out=$("${K[@]}" create namespace pb 2>&1)
if echo "$out" | grep -q "accepted media types include: application/json$"; then ok "protobuf 415 names only JSON"
else bad "protobuf 415 names only JSON" "$out"; fi

out=$("${K[@]}" get events --field-selector metadata.namespace=default -o jsonpath='{range .items[*]}{.reason} {end}' 2>&1)
miss=""
for r in Scheduled Pulled Created Started SuccessfulCreate ScalingReplicaSet Killing Completed; do
    echo "$out" | grep -qw "$r" || miss="$miss $r"
done
if [ -z "$miss" ]; then ok "events recorded"; else bad "events recorded (missing:$miss)" "$out"; fi

# faults through the admin API while kubectl is connected
A=(curl -sS --cacert "$tmp/tls/ca.crt" -H "Authorization: Bearer compat-token")
U="https://127.0.0.1:$port/_kubesim"
"${A[@]}" -X POST "$U/faults" -d '{"errorRate":1.0,"errorStatus":503}' >/dev/null
out=$("${K[@]}" get pods 2>&1)
if echo "$out" | grep -qi "injected fault\|ServiceUnavailable\|503"; then ok "fault: errorRate 1.0 fails kubectl"
else bad "fault: errorRate 1.0 fails kubectl" "$out"; fi
"${A[@]}" -X POST "$U/faults" -d '{"down":true}' >/dev/null
out=$(kubectl --server "https://127.0.0.1:$port" --certificate-authority "$tmp/tls/ca.crt" \
      --token compat-token --request-timeout 3s get pods 2>&1)
rc=$?
if [ "$rc" != "0" ]; then ok "fault: down"; else bad "fault: down" "$out"; fi
"${A[@]}" -X POST "$U/faults" -d '{}' >/dev/null
out=$("${K[@]}" get pods -l app=live -o name 2>&1)
if [ "$(echo "$out" | grep -c pod/)" = "3" ]; then ok "fault: back up"; else bad "fault: back up" "$out"; fi

( timeout 10 "${K[@]}" get --raw '/api/v1/pods?watch=1' >"$tmp/cut" 2>&1; echo "rc=$?" >>"$tmp/cut" ) &
wpid=$!
# cut only once the watch is open (its initial ADDED events arrived)
for _ in $(seq 80); do grep -q '"type":"ADDED"' "$tmp/cut" 2>/dev/null && break; sleep 0.1; done
"${A[@]}" -X POST "$U/cut-watches" >/dev/null
wait "$wpid"
if grep -q '"type":"ADDED"' "$tmp/cut" && grep -q "rc=0" "$tmp/cut"; then ok "fault: cut-watches ends the stream"
else bad "fault: cut-watches ends the stream" "$(tail -3 "$tmp/cut")"; fi

"${A[@]}" -X POST "$U/compact" >/dev/null
out=$("${K[@]}" get --raw '/api/v1/pods?watch=1&resourceVersion=2&timeoutSeconds=2' 2>&1 | head -1)
if echo "$out" | grep -q '"code":410'; then ok "fault: compact makes old RVs 410"; else bad "fault: compact makes old RVs 410" "$out"; fi

out=$("${A[@]}" "$U/stats" 2>&1)
if echo "$out" | grep -q '"requests":{"list":[1-9]' && echo "$out" | grep -q '"watch":[1-9]'; then ok "admin stats"
else bad "admin stats" "$out"; fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
