# Job sets and cron jobs (src/api/jobsets.c, cronjobs.c; issue 14).
#   make bench-jobs   build/bench/jobs_bench (redis-server, kubesim with 3 clusters in 2 zones and
#                     the daemon): p50/p99 of a job set create over 2 clusters and of a cron job
#                     trigger through fleetgate vs one Job create straight to kubesim (ratios),
#                     then BENCH_JOBSETS (1,000) job sets created and run to the end in one
#                     project against a tight quota, and the tier's usage after (must be 0).
#                     BENCH_ROUNDS rounds (default 100), 3 runs. Not in make test.
JOBS_BENCH := $(BUILD)/bench/jobs_bench
BENCH_JOBSETS ?= 1000

$(JOBS_BENCH): $(BUILD)/obj/tests/bench/jobs_bench.o $(TEST_SUPPORT_OBJ) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_ALL) -o $@ $^ $(LIBS) $(CHECK_LIBS)

.PHONY: bench-jobs

bench-jobs: all $(JOBS_BENCH)
	@for run in 1 2 3; do echo "== run $$run"; \
	  FG_BUILD=$(BUILD) $(JOBS_BENCH) $(or $(BENCH_ROUNDS),100) $(BENCH_JOBSETS) || exit 1; done
