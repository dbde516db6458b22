# Fuzz targets (libFuzzer, clang): tests/fuzz/fuzz_<name>.c, one per parser of untrusted input,
# with seeds in tests/fuzz/corpus/<name>/. `make fuzz` builds them; `make fuzz-run` runs each
# for FUZZ_SECONDS (bounded, so it belongs in `make test`). The library is compiled once with
# clang's coverage instrumentation and ASan+UBSan into build/fuzz/libfleetgate.a.

DEB_PKGS += clang libclang-rt-14-dev
FUZZ_CC := clang
FUZZ_SECONDS ?= 15
FUZZ_SRC := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BINS := $(FUZZ_SRC:tests/fuzz/%.c=build/fuzz/%)
FUZZ_SAN := address,undefined
FUZZ_CFLAGS := -std=c11 -D_GNU_SOURCE -g -O1 -fno-sanitize-recover=all -Iinclude $(PKG_CFLAGS) \
               -MMD -MP
FUZZ_LIB := build/fuzz/libfleetgate.a
FUZZ_LIB_OBJ := $(LIB_SRC:%.c=build/fuzz/obj/%.o)

.PHONY: fuzz fuzz-run
TEST_STEPS += fuzz-run

# Objects (the library's and the targets' own) carry -MMD dependency files, which the Makefile
# includes: a header change rebuilds what includes it.
build/fuzz/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link,$(FUZZ_SAN) -c $< -o $@
	@$(EMBED_DEPS)

$(FUZZ_LIB): $(FUZZ_LIB_OBJ)
	rm -f $@
	ar rcs $@ $^

build/fuzz/fuzz_%: build/fuzz/obj/tests/fuzz/fuzz_%.o $(FUZZ_LIB)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) -fsanitize=fuzzer,$(FUZZ_SAN) -o $@ $^ $(LIBS)

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
