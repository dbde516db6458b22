#!/usr/bin/env bash
# conf/demo-auth.sh DIR [--keys-only]: the demo's JWT key pair and tokens, made with the openssl
# CLI at demo time (no private key is ever committed).
#
#   DIR/jwt-private.pem  RSA 2048 signing key (made once; kept while it exists)
#   DIR/jwt-public.pem   its public key: conf/demo.json's auth.keys[0] (kid "demo", RS256)
#   DIR/token            a developer of project "demo", valid 24 hours (made on every run)
#   DIR/admin-token      a platform admin (group fleetgate-admins), valid 24 hours
#
# --keys-only makes the key pair when missing and nothing else (the test suite uses it before
# `fleetgate -c conf/demo.json --check-config`). Concurrent runs are serialised with flock, and
# every file is written to a temporary name and renamed, so a reader never sees half a key.
set -euo pipefail

dir=${1:?usage: conf/demo-auth.sh DIR [--keys-only]}
keys_only=${2:-}
issuer=fleetgate-demo
audience=fleetgate
kid=demo
ttl_s=86400

mkdir -p "$dir"
exec 9>"$dir/.lock"
flock 9

if [ ! -s "$dir/jwt-private.pem" ] || [ ! -s "$dir/jwt-public.pem" ]; then
    tmp=$(mktemp -d "$dir/.keys.XXXXXX")
    openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$tmp/private.pem" 2>/dev/null
    openssl pkey -in "$tmp/private.pem" -pubout -out "$tmp/public.pem"
    chmod 600 "$tmp/private.pem"
    mv -f "$tmp/private.pem" "$dir/jwt-private.pem"
    mv -f "$tmp/public.pem" "$dir/jwt-public.pem"
    rmdir "$tmp"
fi
[ "$keys_only" = "--keys-only" ] && exit 0

b64url() { openssl base64 -A | tr '+/' '-_' | tr -d '='; }

# sign CLAIMS_JSON: a compact RS256 JWS over the demo key.
sign() {
    local header payload sig
    header=$(printf '{"alg":"RS256","typ":"JWT","kid":"%s"}' "$kid" | b64url)
    payload=$(printf '%s' "$1" | b64url)
    sig=$(printf '%s.%s' "$header" "$payload" |
        openssl dgst -sha256 -sign "$dir/jwt-private.pem" -binary | b64url)
    printf '%s.%s.%s' "$header" "$payload" "$sig"
}

now=$(date +%s)
exp=$((now + ttl_s))
common="\"iss\":\"$issuer\",\"aud\":\"$audience\",\"iat\":$now,\"nbf\":$now,\"exp\":$exp"
dev=$(sign "{\"sub\":\"demo-developer\",$common,\"projects\":{\"demo\":\"developer\"}}")
admin=$(sign "{\"sub\":\"demo-admin\",$common,\"groups\":[\"fleetgate-admins\"]}")

umask 077
printf '%s\n' "$dev" > "$dir/.token.tmp" && mv -f "$dir/.token.tmp" "$dir/token"
printf '%s\n' "$admin" > "$dir/.admin-token.tmp" && mv -f "$dir/.admin-token.tmp" "$dir/admin-token"

cat <<EOF
demo token (developer of project "demo", valid 24 h; also in $dir/token,
an admin token is in $dir/admin-token):

$dev

try:  curl -H "Authorization: Bearer \$(cat $dir/token)" http://127.0.0.1:8080/v1/whoami
EOF
