#!/usr/bin/env bash
# tests/bench/sdk_bench.sh: the SDKs' own overhead and fgctl on a large project (not in `make
# test`; `make bench-sdk`). One live stack (tests/sdk/stack.sh) with SDK_SEED_PODS pods (default
# 10,000) in project demo, then, 3 runs each:
#   1. N (default 10,000) sequential GETs of one pod through the TypeScript SDK and with plain
#      fetch (same keep-alive agent, same headers): per-call p50/p99 and the ratio of wall times;
#   2. the same through the Python SDK and with a plain httpx.Client;
#   3. `fgctl get pods -p demo` (every page) wall time, and the rows it printed.
set -euo pipefail
cd "$(dirname "$0")/../.."
N=${N:-10000}
export SDK_SEED_PODS=${SDK_SEED_PODS:-10000} N
make --no-print-directory sdk cli >/dev/null
tests/sdk/stack.sh bash -c '
set -euo pipefail
pod=$(curl -fsS -H "Authorization: Bearer $FG_TOKEN_ADMIN" "$FLEETGATE_URL/v1/projects/demo/pods?limit=1" |
      node -e "console.log(JSON.parse(require(\"fs\").readFileSync(0,\"utf8\")).items[0].name)")
export POD=$pod
echo "sdk_bench: $N GETs of pod $pod, $SDK_SEED_PODS pods in the project; 3 runs each"
for run in 1 2 3; do node tests/bench/sdk_bench_ts.js; done
for run in 1 2 3; do /usr/bin/python3 tests/bench/sdk_bench_py.py; done
for run in 1 2 3; do
    t0=$(date +%s.%N)
    rows=$(FLEETGATE_TOKEN=$FG_TOKEN_ADMIN build/bin/fgctl get pods -p demo | tail -n +2 | wc -l)
    t1=$(date +%s.%N)
    echo "sdk_bench: fgctl get pods: $rows rows in $(echo "$t1 - $t0" | bc) s"
done
'
