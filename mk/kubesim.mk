# kubesim: the Kubernetes API server simulator (tests/kubesim/, see its README.md).
# `make` builds build/kubesim; `make test` runs kubesim-check (its check suites, normal and
# ASan/UBSan builds) and kubesim-kubectl (the real kubectl against it).

KS_DIR := tests/kubesim
KS_SRC := $(filter-out $(KS_DIR)/main.c,$(wildcard $(KS_DIR)/*.c))
KS_OBJ := $(KS_SRC:%.c=$(BUILD)/obj/%.o)
KS_LIB := $(BUILD)/libkubesim.a
KUBESIM := $(BUILD)/kubesim
KS_TEST_SRC := $(wildcard $(KS_DIR)/tests/test_*.c)
KS_TEST_BINS := $(KS_TEST_SRC:%.c=$(BUILD)/%)
# the real fixtures, committed under tests/fixtures/k8s (a copy of ../shared/fixtures/k8s
# without its 5.7 MB openapi-v3 folder); override with FG_SHARED=DIR holding fixtures/k8s
FG_SHARED ?= tests

ALL_BINS += $(KUBESIM)
TEST_STEPS += kubesim-check kubesim-kubectl
# kubesim needs no Debian packages beyond the Makefile's (libmicrohttpd, jansson, libssl, check;
# curl and python3 for kubectl_compat.sh). WebSocket framing for exec is its own (README.md).

$(BUILD)/obj/$(KS_DIR)/%.o: ALL_CFLAGS += -I$(KS_DIR)

$(KS_LIB): $(KS_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@
	ar rcs $@ $^

$(KUBESIM): $(BUILD)/obj/$(KS_DIR)/main.o $(KS_LIB) $(LIB)
	$(CC) $(LDFLAGS_ALL) -o $@ $^ $(LIBS)

# The suites are linked by the Makefile's rule for check suites, with the simulator's archive.
$(KS_TEST_BINS): $(KS_LIB)

.PHONY: kubesim-check kubesim-check-one kubesim-kubectl kubesim-bench

# The suites of this build; kubesim-check runs them here and under ASan/UBSan.
kubesim-check-one: $(KS_TEST_BINS)
	@set -e; for t in $(KS_TEST_BINS); do echo "== $$t"; FG_SHARED=$(FG_SHARED) $$t; done

kubesim-check:
	$(MAKE) --no-print-directory kubesim-check-one
	$(MAKE) --no-print-directory SANITIZE=1 kubesim-check-one

kubesim-kubectl: $(KUBESIM)
	KUBESIM=$(KUBESIM) $(KS_DIR)/kubectl_compat.sh

# Not in make test: seeding 3000 nodes + 120000 pods, RSS, paged LISTs, churn (a minute or so).
kubesim-bench: $(KUBESIM)
	FG_BUILD=$(BUILD) tests/bench/kubesim_bench.sh
