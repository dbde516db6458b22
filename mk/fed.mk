# fed: placement and the write path's federation layer (src/fed/).
#   make bench-fed   build/bench/place_bench: one app placed over 64 clusters x 3,000 nodes
#                    (median and p99 of 1,000 placements per case; not in make test, but the
#                    binary is built by `make`, so it cannot rot)

PLACE_BENCH := $(BUILD)/bench/place_bench
ALL_BINS += $(PLACE_BENCH)

$(PLACE_BENCH): $(BUILD)/obj/tests/bench/place_bench.o $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_ALL) -o $@ $^ $(LIBS)

.PHONY: bench-fed

bench-fed: $(PLACE_BENCH)
	$(PLACE_BENCH) $(BENCH_RUNS)
