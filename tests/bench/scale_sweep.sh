#!/usr/bin/env bash
# tests/bench/scale_sweep.sh: where the scale goal holds on this machine. Runs scale_bench (two
# replicas, three kubesim clusters, Redis, all on this machine) RUNS times at each of RATES,
# rates interleaved (100 125 ... 100 125 ...) so a slow spell of the machine lands on every rate
# alike, and prints per rate the median and spread of the p99 through fleetgate, of the p99 of
# the same scales sent straight to kubesim, and of the cores busy in each run, then the highest
# rate whose median p99 meets the goal (under 50 ms, no error).
# Usage: scale_sweep.sh [SECONDS] [RUNS] [RATES...] (default 20 3 100 125 150 175 200);
# FG_BUILD names the build dir (default build). Not part of make test (make bench-scale-sweep).
set -euo pipefail
bench=scale_sweep
build=${FG_BUILD:-build}
seconds=${1:-20}
runs=${2:-3}
shift 2 2>/dev/null || shift $#
rates=("$@")
[ ${#rates[@]} -gt 0 ] || rates=(100 125 150 175 200)
tmp=$(mktemp -d /tmp/scale-sweep-XXXXXX)
trap 'rm -rf "$tmp"' EXIT

echo "$bench: ${#rates[@]} rates x $runs runs of $seconds s each, interleaved; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for run in $(seq 1 "$runs"); do
    for rate in "${rates[@]}"; do
        out="$tmp/$rate.$run"
        if ! FG_BUILD="$build" "$build/bench/scale_bench" "$seconds" "$rate" >"$out" 2>&1; then
            echo "$bench: scale_bench $seconds $rate failed:"; tail -5 "$out"; exit 1
        fi
        printf '%s: run %s at %s/s: %s\n' "$bench" "$run" "$rate" \
            "$(grep -o 'p99 *[0-9.]* ms' "$out" | head -1)"
    done
done

# One line per rate: the medians (and ranges) of the runs' figures.
python3 - "$tmp" "$runs" "${rates[@]}" <<'EOF'
import os, re, statistics, sys
tmp, runs, rates = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
def figures(text):
    fg = re.search(r'scale through fleetgate.*?p99 +([0-9.]+) ms.*?errors (\d+)', text)
    direct = re.search(r'straight to kubesim.*?p99 +([0-9.]+) ms', text)
    busy_fg = re.search(r'cores busy during the fleetgate run: ([0-9.]+)', text)
    busy_d = re.search(r'cores busy during the direct run: ([0-9.]+)', text)
    load = re.search(r'fleetgate run:.*?the load generator ([0-9.]+)', text)
    return (float(fg.group(1)), int(fg.group(2)), float(direct.group(1)),
            float(busy_fg.group(1)), float(busy_d.group(1)),
            float(load.group(1)) if load else float('nan'))
def med(xs, unit=''):
    return f'{statistics.median(xs):.2f}{unit} ({min(xs):.2f}-{max(xs):.2f})'
best = None
print(f'{"rate":>6}  {"p99 through fleetgate":>26}  {"p99 straight":>22}  '
      f'{"cores busy (fg run)":>20}  {"cores busy (straight)":>21}  {"load generator":>20}  '
      'errors')
for rate in rates:
    f = [figures(open(f'{tmp}/{rate}.{r}').read()) for r in range(1, runs + 1)]
    p99 = [x[0] for x in f]
    errors = sum(x[1] for x in f)
    print(f'{rate:>4}/s  {med(p99, " ms"):>26}  {med([x[2] for x in f], " ms"):>22}  '
          f'{med([x[3] for x in f]):>20}  {med([x[4] for x in f]):>21}  '
          f'{med([x[5] for x in f]):>20}  {errors}')
    if statistics.median(p99) < 50 and errors == 0:
        best = rate
print(f'highest rate whose median p99 through fleetgate is under 50 ms with no error: '
      f'{best + "/s" if best else "none of these"} (the goal: 200/s; here {os.cpu_count()} cores '
      f'hold both replicas, kubesim, Redis and the load generator)')
EOF
