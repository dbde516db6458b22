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

# make bench-writes: build/bench/write_bench (redis-server, kubesim with 3 clusters in 3 zones and
# the daemon): p50/p99 of creating an app over 3 clusters through fleetgate vs one Deployment
# create straight to kubesim and vs three sent straight at once, and the ratios; BENCH_ROUNDS
# rounds (default 100). Not in make test.
WRITE_BENCH := $(BUILD)/bench/write_bench

$(WRITE_BENCH): $(BUILD)/obj/tests/bench/write_bench.o $(TEST_SUPPORT_OBJ) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_ALL) -o $@ $^ $(LIBS) $(CHECK_LIBS)

.PHONY: bench-writes

bench-writes: all $(WRITE_BENCH)
	FG_BUILD=$(BUILD) $(WRITE_BENCH) $(BENCH_ROUNDS)

# make bench-scale: build/bench/scale_bench (redis-server, kubesim with 3 clusters, two daemons):
# BENCH_SCALE_S seconds (default 30) of BENCH_SCALE_RATE scales a second (default 200) through
# the two replicas, then the same rate of replicas patches straight to kubesim; p50/p99/max,
# errors and the ratios. Not in make test.
SCALE_BENCH := $(BUILD)/bench/scale_bench
BENCH_SCALE_S ?= 30
BENCH_SCALE_RATE ?= 200

$(SCALE_BENCH): $(BUILD)/obj/tests/bench/scale_bench.o $(TEST_SUPPORT_OBJ) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_ALL) -o $@ $^ $(LIBS) $(CHECK_LIBS)

.PHONY: bench-scale

bench-scale: all $(SCALE_BENCH)
	FG_BUILD=$(BUILD) $(SCALE_BENCH) $(BENCH_SCALE_S) $(BENCH_SCALE_RATE)

# make bench-scale-sweep: tests/bench/scale_sweep.sh: scale_bench BENCH_SWEEP_RUNS times (default
# 3) at each of BENCH_SWEEP_RATES, interleaved, BENCH_SWEEP_S seconds each (default 20): the median
# p99 per rate and the highest rate that meets the goal on this machine. Not in make test.
BENCH_SWEEP_S ?= 20
BENCH_SWEEP_RUNS ?= 3
BENCH_SWEEP_RATES ?= 100 125 150 175 200

.PHONY: bench-scale-sweep

bench-scale-sweep: all $(SCALE_BENCH)
	FG_BUILD=$(BUILD) tests/bench/scale_sweep.sh $(BENCH_SWEEP_S) $(BENCH_SWEEP_RUNS) $(BENCH_SWEEP_RATES)
