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

wait_http() { # URL [HEADER]
    for _ in $(seq 1 100); do
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
