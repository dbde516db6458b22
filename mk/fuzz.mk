# Fuzz targets (libFuzzer, clang): tests/fuzz/fuzz_<name>.c, one per parser of untrusted input,
# with seeds in tests/fuzz/corpus/<name>/. `make fuzz` builds them; `make fuzz-run` runs each
# for FUZZ_SECONDS (bounded, so it belongs in `make test`). A target is built from the sources
# directly with clang, instrumented with ASan+UBSan, so no separate library build is needed.

DEB_PKGS += clang libclang-rt-14-dev
FUZZ_CC := clang
FUZZ_SECONDS ?= 15
FUZZ_SRC := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BINS := $(FUZZ_SRC:tests/fuzz/%.c=build/fuzz/%)
FUZZ_FLAGS := -std=c11 -D_GNU_SOURCE -g -O1 -fsanitize=fuzzer,address,undefined \
              -fno-sanitize-recover=all -Iinclude $(PKG_CFLAGS)

.PHONY: fuzz fuzz-run
TEST_STEPS += fuzz-run

build/fuzz/%: tests/fuzz/%.c $(LIB_SRC) $(wildcard include/fleetgate/*.h)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ $< $(LIB_SRC) $(LIBS)

fuzz: $(FUZZ_BINS)

# Each target runs on a scratch copy of its seeds, so the committed corpus stays as it is.
fuzz-run: fuzz
	@set -e; for f in $(FUZZ_BINS); do \
	  name=$${f#build/fuzz/fuzz_}; work=build/fuzz/work-$$name; rm -rf $$work; mkdir -p $$work; \
	  [ -d tests/fuzz/corpus/$$name ] && cp -r tests/fuzz/corpus/$$name/. $$work/ || true; \
	  echo "== fuzz $$name for $(FUZZ_SECONDS)s"; \
	  rc=0; $$f -max_total_time=$(FUZZ_SECONDS) -max_len=65536 -print_final_stats=1 $$work \
	    > $$work.log 2>&1 || rc=$$?; \
	  grep -E "^stat::(number_of_executed_units|peak_rss)" $$work.log || true; \
	  if [ $$rc -ne 0 ]; then tail -60 $$work.log; echo "fuzz $$name: FAILED"; exit 1; fi; \
	done
