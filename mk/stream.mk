# The streams (src/stream/: pod logs, exec over WebSocket). tests/integration/test_stream.c drives
# exec with Debian's python3-websocket (a WebSocket client no one here wrote), through
# /usr/bin/python3 (../shared/STYLE.md: the python3 first on PATH lacks Debian's modules).
DEB_PKGS += python3-websocket

# make bench-stream: tests/bench/stream_bench.sh (not in `make test`): 1,000 follow streams of pod
# logs through fleetgate against 10 read straight from kubesim: RSS per stream, line latency
# p50/p99 and their ratios, CPU per line relayed, and the p50/p99 of 200 GETs a second on a
# keep-alive connection (client's and fleetgate's own, from its access log) idle, with the same
# follows read kubesim straight and through fleetgate, with what loaded the machine; RUNS (3)
# times with medians and spreads. STREAMS, SECONDS and GET_RATE change the load.
.PHONY: bench-stream
bench-stream: all
	FG_BUILD=$(BUILD) tests/bench/stream_bench.sh $(or $(STREAMS),1000) $(or $(SECONDS),15)

# make bench-exec: tests/bench/exec_bench.sh (not in `make test`): the exec round trip (a stdin
# byte to its echo on stdout) through fleetgate against straight to kubesim, p50/p99 and ratios,
# 3 runs. ROUND_TRIPS changes the count (500).
.PHONY: bench-exec
bench-exec: all
	FG_BUILD=$(BUILD) tests/bench/exec_bench.sh $(or $(ROUND_TRIPS),500)
