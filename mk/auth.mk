# auth: JWT keys, roles, audit, rate limits (src/auth/, src/cache/redis.c, cache/ratelimit.lua).
#   The rate limiter embeds cache/ratelimit.lua with the assembler's .incbin; the Makefile's
#   EMBED_DEPS makes its objects depend on the script.
#   make demo-auth   a demo key pair in build/demo/ (openssl CLI; no private key is committed),
#                    build/demo/token (developer of "demo"), build/demo/admin-token
#   make bench-auth  tests/bench/auth_bench.sh: fleetgate vs nginx under wrk, and the 429 path
#   make bench-front-door  tests/bench/front_door.sh: slowloris, refusal flood, hung Redis
#                    (neither in make test)
#   tests/fuzz/fuzz_token.c joins mk/fuzz.mk's targets through its wildcard (fuzz-run in make test)

# openssl (the CLI) makes the demo key, also for the suite's check of conf/demo.json. The bench's
# tools are not needed by `make test`: `make deps-bench` installs them.
DEB_PKGS += openssl
BENCH_DEB_PKGS := wrk nginx-light curl
DEMO_PREREQS += demo-auth

.PHONY: demo-auth bench-auth bench-front-door deps-bench

demo-auth:
	@conf/demo-auth.sh build/demo

deps-bench:
	$(SUDO) apt-get update
	$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
	  $(BENCH_DEB_PKGS)

bench-auth: all
	FG_BUILD=$(BUILD) tests/bench/auth_bench.sh

# The front door under a slowloris, a flood of unauthenticated calls and a hung Redis (loopback,
# bounded; tests/bench/front_door.sh says what it prints).
bench-front-door: all
	FG_BUILD=$(BUILD) tests/bench/front_door.sh
