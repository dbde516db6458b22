#!/usr/bin/env bash
# tests/sdk/quickstart_cli.sh: the fgctl quick start of README.md, run live by make sdk-test-cli
# (which checks its output); the lines between the markers are the README's.
set -euo pipefail
cd "$(dirname "$0")/../.."
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
token_file=$work/token
cd "$work"
printf '%s\n' "$FLEETGATE_TOKEN" >"$token_file"
export FGCTL_CONFIG=$work/config.json
repo=$OLDPWD
url=$FLEETGATE_URL
unset FLEETGATE_URL FLEETGATE_TOKEN
# quickstart:begin
make -C "$repo" cli                        # build/bin/fgctl, nothing installed globally
export PATH=$repo/build/bin:$PATH
source "$repo/build/share/fgctl/fgctl.bash" # completion (fgctl.zsh for zsh)
fgctl login --url "$url" --token-file "$token_file" -p demo
cat > hello.yaml <<'YAML'
name: hello
spec:
  replicas: 2
  tier: OnDemand
  containers:
    - name: app
      image: nginx:1.27
      resources: {requests: {cpu: 100m, memory: 64Mi}}
YAML
fgctl create -f hello.yaml --wait
fgctl scale app hello --replicas 3 --wait
fgctl get app hello
fgctl get pods --limit 3 -o name
fgctl delete app hello
# quickstart:end
