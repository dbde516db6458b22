# front: the front door's hot path (issue 18) and libmicrohttpd's own answers (issue 11, item 6).
#   make bench-callgrind  tests/bench/callgrind_get.sh: instructions per authenticated,
#                         rate-limited, access-logged GET of a cached pod (callgrind, minus an
#                         idle run). Not in make test.

.PHONY: bench-callgrind

bench-callgrind: all $(BARE_MHD)
	FG_BUILD=$(BUILD) tests/bench/callgrind_get.sh

# The bare libmicrohttpd server bench-callgrind measures fleetgate against (built by `make`, so
# it cannot rot).
BARE_MHD := $(BUILD)/bench/bare_mhd
ALL_BINS += $(BARE_MHD)

$(BARE_MHD): $(BUILD)/obj/tests/bench/bare_mhd.o
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_ALL) -o $@ $^ $(LIBS)
