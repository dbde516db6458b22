# front: the front door's hot path (issue 18) and libmicrohttpd's own answers (issue 11, item 6).
#   make bench-callgrind  tests/bench/callgrind_get.sh: instructions per authenticated,
#                         rate-limited, access-logged GET of a cached pod (callgrind, minus an
#                         idle run). Not in make test.

.PHONY: bench-callgrind

bench-callgrind: all
	FG_BUILD=$(BUILD) tests/bench/callgrind_get.sh
