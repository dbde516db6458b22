# The API contract (api/openapi.yaml) and its tools, from the npm registry: package.json and
# package-lock.json pin them, `npm ci` installs them into node_modules/ (git-ignored).
#   make openapi-lint       Redocly lint with redocly.yaml: zero errors and zero warnings
#   make openapi-lint-broken  the same lint must fail on a deliberately broken copy (build/openapi/)
#   make openapi-examples   every example in the spec validates against its schema
#   make docs               build/docs/index.html, the self-contained Redoc reference served at /docs
#   make openapi-test       all of the above (a step of `make test`)
# tests/contract/validate.mjs checks one HTTP answer against the contract; tests/support/contract.c
# calls it from the check suites, so the test binaries wait for npm-ensure.

OPENAPI_SPEC := api/openapi.yaml
NPM_STAMP := node_modules/.fleetgate-npm-ci
REDOCLY := env REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true node_modules/.bin/redocly

.PHONY: npm-ensure openapi-lint openapi-lint-broken openapi-examples openapi-test docs
TEST_STEPS += openapi-test
DEMO_PREREQS += docs

# Installs Debian's nodejs and npm only when npm is missing, then `npm ci` only when node_modules
# is missing or older than the lock file.
npm-ensure:
	@if ! command -v npm >/dev/null 2>&1; then \
	  echo "npm-ensure: installing nodejs and npm (Debian)"; \
	  $(SUDO) apt-get update && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends nodejs npm; \
	fi
	@if [ ! -f $(NPM_STAMP) ] || [ package-lock.json -nt $(NPM_STAMP) ] || [ package.json -nt $(NPM_STAMP) ]; then \
	  echo "npm-ensure: npm ci"; \
	  npm ci --no-audit --no-fund --loglevel=error && touch $(NPM_STAMP); \
	fi

# The check suites call node (contract_check), so they are built after the tools are in place.
$(BUILD)/tests/unit/test_contract $(INTEG_BINS): | npm-ensure

# Redocly exits non-zero on errors only; the JSON report's totals make warnings fail too.
openapi-lint: npm-ensure
	@mkdir -p build/openapi
	@$(REDOCLY) lint --config redocly.yaml --format json $(OPENAPI_SPEC) > build/openapi/lint.json 2>/dev/null; \
	node -e 'const t = JSON.parse(require("fs").readFileSync("build/openapi/lint.json", "utf8")).totals; if (t.errors || t.warnings) process.exit(1); console.log(`openapi-lint: $(OPENAPI_SPEC): 0 errors, 0 warnings ($${t.ignored} ignored, listed in .redocly.lint-ignore.yaml)`)' \
	|| { $(REDOCLY) lint --config redocly.yaml $(OPENAPI_SPEC); echo "openapi-lint: FAILED"; exit 1; }

# A copy whose error response points at a schema that does not exist: the lint must refuse it.
openapi-lint-broken: npm-ensure
	@mkdir -p build/openapi
	@sed 's|#/components/schemas/Problem|#/components/schemas/NoSuchProblem|' $(OPENAPI_SPEC) > build/openapi/broken.yaml
	@cmp -s $(OPENAPI_SPEC) build/openapi/broken.yaml && { echo "openapi-lint-broken: the copy is not broken"; exit 1; } || true
	@if $(REDOCLY) lint --config redocly.yaml build/openapi/broken.yaml > build/openapi/broken.log 2>&1; then \
	  cat build/openapi/broken.log; echo "openapi-lint-broken: the lint passed a broken spec"; exit 1; \
	elif ! grep -q 'no-unresolved-refs' build/openapi/broken.log; then \
	  cat build/openapi/broken.log; echo "openapi-lint-broken: the lint failed, not for the broken reference"; exit 1; \
	else echo "openapi-lint-broken: the broken copy is refused (no-unresolved-refs), as it must be"; fi

openapi-examples: npm-ensure
	@node tests/contract/check-examples.mjs $(OPENAPI_SPEC)

docs: build/docs/index.html

build/docs/index.html: $(OPENAPI_SPEC) redocly.yaml package-lock.json api/tools/inline-redoc.mjs | npm-ensure
	@mkdir -p build/docs
	@$(REDOCLY) build-docs $(OPENAPI_SPEC) --config redocly.yaml --title "fleetgate API reference" \
	  --disableGoogleFont --output build/docs/redoc-cdn.html >/dev/null
	@node api/tools/inline-redoc.mjs build/docs/redoc-cdn.html $@

openapi-test: openapi-lint openapi-lint-broken openapi-examples docs
	@echo "openapi-test: passed"
