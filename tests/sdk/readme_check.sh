#!/usr/bin/env bash
# tests/sdk/readme_check.sh: each quick start in README.md is the text between the markers of
# the test that runs it (tests/sdk/quickstart.{js,py}, quickstart_cli.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
fails=0
for f in tests/sdk/quickstart.js tests/sdk/quickstart.py tests/sdk/quickstart_cli.sh; do
    want=$(sed -n '/quickstart:begin/,/quickstart:end/p' "$f" | sed '1d;$d')
    got=$(sed -n "/<!-- quickstart: $(basename "$f") -->/,/^\`\`\`\$/p" README.md | sed '1,2d;$d')
    if [ "$want" = "$got" ]; then echo "ok - README quick start = $f"
    else echo "not ok - README quick start differs from $f:"; diff <(echo "$want") <(echo "$got") || true; fails=$((fails + 1)); fi
done
[ "$fails" = 0 ]
