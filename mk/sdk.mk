# SDKs generated from the contract and the fgctl CLI (sdk-gen/, tests/sdk/; see sdk-gen/README.md).
#   make sdk        regenerates both SDKs from api/openapi.yaml into build/sdk/{typescript,python}
#   make cli        build/bin/fgctl (the CLI, on the TypeScript SDK), plus its bash/zsh completion
#   make sdk-test   the SDK and CLI suites against a live fleetgate (a step of `make test`)
#   make bench-sdk  SDK overhead against plain fetch/httpx, and `fgctl get pods` on 10,000 pods
# The generated code is not committed: it is written under build/ by every `make sdk`, so what is
# tested is always what the spec says now.

SDK_TS := build/sdk/typescript
SDK_PY := build/sdk/python
SYS_PYTHON := /usr/bin/python3
DEB_PKGS += python3-httpx python3-jinja2 python3-yaml tmux

.PHONY: sdk sdk-ts sdk-py cli sdk-test sdk-test-ts sdk-test-py sdk-test-cli bench-sdk
TEST_STEPS += sdk-test

sdk: sdk-ts sdk-py

sdk-ts: npm-ensure
	@node sdk-gen/typescript/build.mjs

sdk-py:
	@$(SYS_PYTHON) sdk-gen/python/generate.py api/openapi.yaml $(SDK_PY)

SDK_STACK_PREREQS := $(DAEMON) $(KUBESIM) build/docs/index.html

sdk-test-ts: sdk-ts $(SDK_STACK_PREREQS)
	@echo "== TypeScript SDK against a live fleetgate (1,000 pods)"
	@SDK_SEED_PODS=1000 tests/sdk/stack.sh bash -c 'set -e; node --test-reporter=spec tests/sdk/ts_sdk_test.js; \
	  FLEETGATE_TOKEN=$$FG_TOKEN_ADMIN node tests/sdk/quickstart.js 2>&1 | tee build/sdk/quickstart-ts.out; \
	  grep -q "^project demo runs 10[0-9][0-9] pods$$" build/sdk/quickstart-ts.out && \
	  grep -q "^not found: no app no-such-app in project demo (request [0-9a-f]*)$$" build/sdk/quickstart-ts.out && \
	  grep -q "^GET .*/v1/whoami 200 .* id=[0-9a-f]*$$" build/sdk/quickstart-ts.out && echo "quickstart.js: as in the README"'
	@echo "== TypeScript SDK: fleetgate's own 429"
	@SDK_READ_PER_MINUTE=120 SDK_READ_BURST=2 tests/sdk/stack.sh node --test-reporter=spec tests/sdk/ts_ratelimit_test.js

sdk-test-cli: build/bin/fgctl $(SDK_STACK_PREREQS)
	@echo "== fgctl against a live fleetgate"
	@SDK_SEED_PODS=40 tests/sdk/stack.sh bash -c 'set -e; tests/sdk/cli_test.sh; \
	  FLEETGATE_TOKEN=$$FG_TOKEN_ADMIN tests/sdk/quickstart_cli.sh > build/sdk/quickstart-cli.out 2>&1 || { cat build/sdk/quickstart-cli.out; exit 1; }; \
	  cat build/sdk/quickstart-cli.out; \
	  grep -q "^logged in to http://127.0.0.1:[0-9]* as sdk-admin$$" build/sdk/quickstart-cli.out && \
	  grep -q "^app/hello rolled out (3 ready)$$" build/sdk/quickstart-cli.out && \
	  grep -qE "^hello +3/3 +3 +3 +Running" build/sdk/quickstart-cli.out && \
	  grep -q "^app/hello deleted$$" build/sdk/quickstart-cli.out && echo "quickstart_cli.sh: as in the README"'

sdk-test-py: sdk-py $(SDK_STACK_PREREQS)
	@echo "== Python SDK against a live fleetgate (1,000 pods)"
	@SDK_SEED_PODS=1000 tests/sdk/stack.sh bash -c 'set -e; $(SYS_PYTHON) -W ignore::ResourceWarning tests/sdk/test_py_sdk.py; \
	  FLEETGATE_TOKEN=$$FG_TOKEN_ADMIN $(SYS_PYTHON) tests/sdk/quickstart.py 2>&1 | tee build/sdk/quickstart-py.out; \
	  grep -q "^hello sdk-admin$$" build/sdk/quickstart-py.out && \
	  grep -q "^project demo runs 10[0-9][0-9] pods$$" build/sdk/quickstart-py.out && \
	  grep -q "^not found: no app no-such-app in project demo (request [0-9a-f]*)$$" build/sdk/quickstart-py.out && echo "quickstart.py: as in the README"'

# An operation added to the spec appears in both SDKs; the README's quick starts are the tests'.
sdk-test-gen: npm-ensure
	@tests/sdk/new_op_test.sh
	@tests/sdk/readme_check.sh

sdk-test: sdk-test-gen sdk-test-ts sdk-test-py sdk-test-cli

# fgctl: a launcher in build/bin that runs cli/fgctl.js with the SDK of this tree; completion
# scripts next to it (build/share/fgctl/fgctl.{bash,zsh}). Nothing is installed globally.
cli: build/bin/fgctl

build/bin/fgctl: cli/fgctl.js sdk-ts
	@mkdir -p build/bin build/share/fgctl
	@printf '#!/bin/sh\nexec node "%s/cli/fgctl.js" "$$@"\n' "$(CURDIR)" > $@.tmp && chmod 755 $@.tmp && mv $@.tmp $@
	@$@ completion bash > build/share/fgctl/fgctl.bash
	@$@ completion zsh > build/share/fgctl/fgctl.zsh
	@echo "cli: $@ (completion: source build/share/fgctl/fgctl.bash or fgctl.zsh)"

bench-sdk: $(SDK_STACK_PREREQS)
	tests/bench/sdk_bench.sh
