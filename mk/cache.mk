# cache: the informers (src/cache/informer.c, cache/cache_*.lua), the demo and the cache bench.
#   The informers embed cache/cache_*.lua with the assembler's .incbin; the Makefile's
#   EMBED_DEPS makes their objects depend on the scripts.
#   make demo         (Makefile) runs conf/demo.sh: redis-server, kubesim (3 clusters, 2 zones,
#                     a "demo" project with running apps) and fleetgate on build/demo/fleetgate.json
#   make bench-cache  tests/bench/cache_sync_bench.sh: initial sync of 120,000 pods + 3,000 nodes,
#                     freshness at 1,000 and 60,000 mutations/min, Redis memory per pod (not in
#                     make test); BENCH_PODS / BENCH_NODES make it smaller
#   make bench-prune  build/bench/prune_bench: one real Deployment watch event pruned and parsed,
#                     with fleetgate's placement explanation cut unparsed against managedFields
#                     alone (medians over rounds, the ratio; not in make test, but the binary is
#                     built by `make`, so it cannot rot)

CACHE_PROBE := $(BUILD)/bench/cache_probe

$(CACHE_PROBE): $(BUILD)/obj/tests/bench/cache_probe.o $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_ALL) -o $@ $^ $(LIBS)

.PHONY: bench-cache

bench-cache: all $(CACHE_PROBE)
	FG_BUILD=$(BUILD) tests/bench/cache_sync_bench.sh

PRUNE_BENCH := $(BUILD)/bench/prune_bench
ALL_BINS += $(PRUNE_BENCH)

$(PRUNE_BENCH): $(BUILD)/obj/tests/bench/prune_bench.o $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_ALL) -o $@ $^ $(LIBS)

.PHONY: bench-prune

bench-prune: $(PRUNE_BENCH)
	$(PRUNE_BENCH)
