# tests/bench/lib.sh: what the benchmark scripts share (sourced, never run): a private temp dir
# removed at exit together with every process the script started (append their pids to `pids`),
# free ports, waiting for an HTTP answer, and nginx serving a static file of a given size.
# The sourcing script sets `bench` (its name, for messages) first.

bench_tmp() { # PREFIX: sets tmp (mode 755: nginx's workers, user nobody as root, read from it)
    tmp=$(mktemp -d "/tmp/$1-XXXXXX")
    chmod 755 "$tmp"
    pids=()
    trap bench_cleanup EXIT
}

bench_cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    rm -rf "$tmp"
}

used_ports=" "
pick_port() { # VAR: a random high port nothing answers on (and not handed out before)
    local p
    while :; do
        p=$((20000 + RANDOM % 40000))
        case "$used_ports" in *" $p "*) continue ;; esac
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
            used_ports="$used_ports$p "
            printf -v "$1" '%s' "$p"
            return
        fi
    done
}

wait_http() { # URL [HEADER]: up to 30 s (a daemon starts slowly on a machine at load 15+)
    for _ in $(seq 1 600); do
        curl -fsS -o /dev/null ${2:+-H "$2"} "$1" 2>/dev/null && return 0
        sleep 0.05
    done
    echo "$bench: $1 does not answer"; exit 1
}

start_nginx() { # FILE SIZE WORKERS: nginx-light serving FILE of SIZE bytes; sets ng_url
    local ng_port nginx_bin
    nginx_bin=$(command -v nginx || echo /usr/sbin/nginx)
    pick_port ng_port
    mkdir -p "$tmp/www"
    head -c "$2" /dev/zero | tr '\0' 'x' >"$tmp/www/$1"
    chmod 644 "$tmp/www/$1"
    chmod 755 "$tmp/www"
    cat >"$tmp/nginx.conf" <<NGINX
worker_processes $3;
pid $tmp/nginx.pid;
error_log $tmp/nginx-error.log warn;
events { worker_connections 1024; }
http {
    access_log off;
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
    }
}
NGINX
    "$nginx_bin" -p "$tmp" -c "$tmp/nginx.conf" -g 'daemon off;' 2>"$tmp/nginx.stderr" &
    pids+=($!)
    ng_url="http://127.0.0.1:$ng_port/$1"
    wait_http "$ng_url"
}

# RESP commands for redis-cli --pipe: N pods (about 1.3 KB each, the size of a simplified pod
# with two containers), their index, the scope set, the app sets, sync state and cluster health.
fill_pods() { # REDIS_PORT N: N pods of project "demo" in cluster "bench-a", written as the
    # informers write them (cache/SCHEMA.md section 2)
    awk -v n="$2" -v now="$(date +%s%3N)" '
function cmd(argc, a,    i, s) {
    s = "*" argc "\r\n"
    for (i = 1; i <= argc; i++) s = s "$" length(a[i]) "\r\n" a[i] "\r\n"
    printf "%s", s
}
BEGIN {
    for (i = 0; i < n; i++) {
        app = sprintf("app-%02d", i % 40)
        name = sprintf("%s-7d9f8b6c5-%06d", app, i)
        pod = sprintf("{\"name\":\"%s\",\"project\":\"demo\",\"cluster\":\"bench-a\",\"zone\":\"zone-a\",\"uid\":\"6b1c0e4e-0d5f-4f43-9a38-%012d\",\"version\":\"%d\",\"creationTime\":\"2026-11-22T10:00:00Z\",\"labels\":{\"app\":\"%s\",\"team\":\"checkout\",\"track\":\"stable\"},\"app\":\"%s\",\"node\":\"node-%04d.zone-a.bench\",\"phase\":\"Running\",\"ready\":true,\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\",\"since\":\"2026-11-22T10:00:09Z\"}],\"restarts\":0,\"containers\":[{\"name\":\"main\",\"image\":\"registry.example.com/checkout/%s:1.24.3\",\"resources\":{\"requests\":{\"cpu\":\"250m\",\"memory\":\"256Mi\"},\"limits\":{\"cpu\":\"1\",\"memory\":\"512Mi\"}},\"state\":\"running\",\"startedAt\":\"2026-11-22T10:00:05Z\",\"ready\":true,\"restarts\":0},{\"name\":\"proxy\",\"image\":\"registry.example.com/platform/envoy:1.31.0\",\"resources\":{\"requests\":{\"cpu\":\"100m\",\"memory\":\"64Mi\"}},\"state\":\"running\",\"startedAt\":\"2026-11-22T10:00:04Z\",\"ready\":true,\"restarts\":0}],\"requestUnits\":{\"cpuMilli\":350,\"memoryBytes\":335544320},\"podIPs\":[\"10.%d.%d.%d\"],\"hostIP\":\"192.168.%d.%d\",\"startTime\":\"2026-11-22T10:00:01Z\"}",
            name, i, 1000 + i, app, app, i % 500, app, int(i / 65536) % 256, int(i / 256) % 256, i % 256, int(i / 256) % 256, i % 256)
        a[1] = "HSET"; a[2] = "fg:o:pod:bench-a:demo"; a[3] = name; a[4] = pod; cmd(4, a)
        a[1] = "ZADD"; a[2] = "fg:i:pod:bench-a:demo"; a[3] = "0"; a[4] = name; cmd(4, a)
        a[1] = "SADD"; a[2] = "fg:a:bench-a:demo:" app; a[3] = name; cmd(3, a)
    }
    a[1] = "SADD"; a[2] = "fg:s:pod:bench-a"; a[3] = "demo"; cmd(3, a)
    split("namespaces nodes pods deployments jobs cronjobs horizontalpodautoscalers events", res, " ")
    for (r = 1; r <= 8; r++) {
        a[1] = "HSET"; a[2] = "fg:sync:bench-a:" res[r]; a[3] = "state"; a[4] = "Synced"
        a[5] = "rv"; a[6] = "20000"; a[7] = "objects"; a[8] = (res[r] == "pods" ? n : 0)
        a[9] = "lastEventMs"; a[10] = now; a[11] = "lastSyncMs"; a[12] = now; cmd(12, a)
    }
    a[1] = "HSET"; a[2] = "fg:cluster:bench-a"; a[3] = "zone"; a[4] = "zone-a"; a[5] = "health"
    a[6] = "Healthy"; a[7] = "lastContactMs"; a[8] = now; cmd(8, a)
}' >"$tmp/fill.resp"
    redis-cli -p "$1" --pipe <"$tmp/fill.resp" >"$tmp/fill.log"
}
