# reads: the read APIs served from Redis (src/api/reads.c, pods.c, workloads.c, platform.c).
# Neither target is part of `make test`:
#   make bench-reads          tests/bench/reads_bench.sh: a page of 500 pods from a project of
#                             10,000 (p50, p99) and GET of one pod against nginx under wrk
#   make bench-reads-offload  tests/bench/reads_offload.sh: kubesim + fleetgate with its
#                             informers; 10,000+ reads through fleetgate, 0 requests on the cluster

.PHONY: bench-reads bench-reads-offload

bench-reads: all
	FG_BUILD=$(BUILD) tests/bench/reads_bench.sh

bench-reads-offload: all
	FG_BUILD=$(BUILD) tests/bench/reads_offload.sh
