#!/usr/bin/env bash
# conf/demo.sh BUILD LISTEN (run by `make demo`): fleetgate in front of three simulated member
# clusters in two zones, all on 127.0.0.1, in build/demo/:
#   - redis-server on DEMO_REDIS_PORT (default 6379), data in build/demo/redis (no persistence)
#   - BUILD/kubesim with clusters demo-east-1 / demo-east-2 (zone east-a / east-b... see below)
#     on DEMO_KUBESIM_PORT..+2 (default 16443), HTTPS with build/demo/kubesim-tls/ca.crt and
#     the bearer token in build/demo/kubesim-token; each seeded with project "demo" (nodes and
#     running apps: Deployments with their pods), plus two apps created through the API
#   - build/demo/fleetgate.json, made from conf/demo.json with the clusters, CA, token file and
#     Redis URL filled in; fleetgate listens on LISTEN
#   - fleetgate also serves HTTPS on DEMO_TLS_LISTEN (default 127.0.0.1:8443) with a certificate
#     made here with the openssl CLI (build/demo/tls.crt, its own CA), for kubectl: the
#     kubeconfig is GET /v1/projects/demo/kubeconfig (README "kubectl through fleetgate")
# Ctrl-C (or SIGTERM) stops all three.
set -euo pipefail
# Every file here is the user's alone: kubesim.json and kubesim-token hold the clusters' bearer
# token, fleetgate.json names it; created 0600 from the start, never readable for a moment.
umask 077

build=${1:-build}
listen=${2:-127.0.0.1:8080}
dir=build/demo
redis_port=${DEMO_REDIS_PORT:-6379}
ks_port=${DEMO_KUBESIM_PORT:-16443}
tls_listen=${DEMO_TLS_LISTEN:-127.0.0.1:8443}
token=demo-cluster-token

mkdir -p "$dir/redis"
pids=()
cleanup() {
    trap - EXIT INT TERM
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
}
trap cleanup EXIT
trap 'exit 0' INT TERM

if redis-cli -p "$redis_port" ping >/dev/null 2>&1; then
    echo "demo: something already answers on port $redis_port; set DEMO_REDIS_PORT" >&2
    exit 1
fi
redis-server --port "$redis_port" --bind 127.0.0.1 --dir "$dir/redis" --save '' \
    --appendonly no >"$dir/redis.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do redis-cli -p "$redis_port" ping >/dev/null 2>&1 && break; sleep 0.05; done

# three clusters, two zones
names=(demo-east-1 demo-east-2 demo-west-1)
zones=(east-a east-b west-a)
regions=(us-east us-east us-west)
{
    echo '{"clusters": ['
    for i in 0 1 2; do
        [ "$i" -gt 0 ] && echo ','
        printf '{"name": "%s", "region": "%s", "zone": "%s", "port": %d, "token": "%s"}' \
            "${names[$i]}" "${regions[$i]}" "${zones[$i]}" $((ks_port + i)) "$token"
    done
    echo ']}'
} >"$dir/kubesim.json"
printf '%s\n' "$token" >"$dir/kubesim-token"
chmod 600 "$dir/kubesim-token"
"$build/kubesim" --config "$dir/kubesim.json" --token "$token" --tls-dir "$dir/kubesim-tls" \
    --seed-nodes 4 --seed-pods 30 --seed-namespace demo >"$dir/kubesim.out" 2>"$dir/kubesim.log" &
pids+=($!)
for _ in $(seq 200); do [ "$(grep -c '^cluster ' "$dir/kubesim.out" 2>/dev/null)" = 3 ] && break; sleep 0.05; done
if [ "$(grep -c '^cluster ' "$dir/kubesim.out")" != 3 ]; then
    cat "$dir/kubesim.log" >&2
    echo "demo: kubesim did not start" >&2
    exit 1
fi
ca="$dir/kubesim-tls/ca.crt"

# two more apps in every cluster, through the Kubernetes API (kubesim's controller, when it has
# one, runs their pods)
for i in 0 1 2; do
    for app in web api; do
        curl -sS -o /dev/null --cacert "$ca" -H "Authorization: Bearer $token" \
            -H 'Content-Type: application/json' -X POST \
            "https://127.0.0.1:$((ks_port + i))/apis/apps/v1/namespaces/demo/deployments" \
            -d '{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"'$app'","labels":{"app":"'$app'"}},
                 "spec":{"replicas":2,"selector":{"matchLabels":{"app":"'$app'"}},
                 "template":{"metadata":{"labels":{"app":"'$app'"}},
                 "spec":{"containers":[{"name":"'$app'","image":"nginx:1.27",
                 "resources":{"requests":{"cpu":"100m","memory":"64Mi"}}}]}}}}' || true
    done
done

# project "demo" gets a quota in every tier (annotations on its namespaces, as fleetgate's own
# PATCH /v1/projects/demo writes them), so a new user can create an app at once
quota='{"metadata":{"annotations":{'
for tier in reserved ondemand preemptible; do
    quota+="\"fleetgate.io/quota-$tier-cpu\":\"16\",\"fleetgate.io/quota-$tier-memory\":\"64Gi\","
    quota+="\"fleetgate.io/quota-$tier-pods\":\"100\","
done
quota="${quota%,}}}}"
for i in 0 1 2; do
    curl -sS -o /dev/null --cacert "$ca" -H "Authorization: Bearer $token" \
        -H 'Content-Type: application/merge-patch+json' -X PATCH \
        "https://127.0.0.1:$((ks_port + i))/api/v1/namespaces/demo" -d "$quota" || true
done

# build/demo/fleetgate.json: conf/demo.json with the clusters and Redis filled in
clusters=""
for i in 0 1 2; do
    [ "$i" -gt 0 ] && clusters+=", "
    clusters+="{\"name\": \"${names[$i]}\", \"region\": \"${regions[$i]}\", \"zone\": \"${zones[$i]}\","
    clusters+=" \"url\": \"https://127.0.0.1:$((ks_port + i))\", \"token_file\": \"$dir/kubesim-token\","
    clusters+=" \"ca_file\": \"$ca\"}"
done
sed -e "s|\"clusters\": \[\]|\"clusters\": [$clusters]|" \
    -e "s|redis://127.0.0.1:6379/0|redis://127.0.0.1:$redis_port/0|" conf/demo.json \
    >"$dir/fleetgate.json"
# fleetgate's TLS listener: a self-signed certificate for 127.0.0.1 and localhost (made once)
if [ ! -s "$dir/tls.crt" ] || [ ! -s "$dir/tls.key" ]; then
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 365 \
        -subj /CN=fleetgate-demo -addext subjectAltName=IP:127.0.0.1,DNS:localhost \
        -keyout "$dir/tls.key" -out "$dir/tls.crt" 2>/dev/null
fi
tls="\"tls\": {\"listen\": \"$tls_listen\", \"cert_file\": \"$dir/tls.crt\","
tls+=" \"key_file\": \"$dir/tls.key\", \"ca_file\": \"$dir/tls.crt\"},"
sed -i "1s|^{|{$tls|" "$dir/fleetgate.json"
grep -q "${names[2]}" "$dir/fleetgate.json" || { echo "demo: conf/demo.json has no \"clusters\": []" >&2; exit 1; }

echo "demo: redis 127.0.0.1:$redis_port, kubesim https://127.0.0.1:$ks_port..$((ks_port + 2)) (CA $ca)"
echo "demo: fleetgate http://$listen and https://$tls_listen with $dir/fleetgate.json (Ctrl-C stops everything)"
cat <<EOF
demo: kubectl through fleetgate (https://$tls_listen, CA $dir/tls.crt):
  curl -s -H "Authorization: Bearer \$(cat $dir/token)" http://$listen/v1/projects/demo/kubeconfig > $dir/kubeconfig
  kubectl --kubeconfig $dir/kubeconfig --token "\$(cat $dir/token)" get pods
  kubectl --kubeconfig $dir/kubeconfig --token "\$(cat $dir/token)" logs -f POD
  kubectl --kubeconfig $dir/kubeconfig --token "\$(cat $dir/admin-token)" exec -it POD -- sh
  (one context per cluster: --context demo@demo-east-2; exec needs the operator role)
EOF
"$build/fleetgate" -c "$dir/fleetgate.json" --listen "$listen" &
pids+=($!)
wait "${pids[-1]}"
