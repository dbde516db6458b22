# fleetgate: `make` builds, `make test` checks everything, `make demo` runs it.
#
# Layout: src/<module>/*.c form build/libfleetgate.a; src/main.c links it into build/fleetgate.
# tests/unit/test_*.c and tests/integration/test_*.c are check suites, one binary each.
# Parts with their own rules live in mk/*.mk (each appends to ALL_BINS, TEST_STEPS, DEB_PKGS).
# SANITIZE=1 builds everything under build/asan with ASan+UBSan; `make asan` runs the suites so.

.DEFAULT_GOAL := all
SHELL := /bin/bash

SANITIZE ?= 0
ifeq ($(SANITIZE),1)
BUILD ?= build/asan
SAN_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
else
BUILD ?= build
SAN_FLAGS :=
endif

CC ?= cc
PKGS := libmicrohttpd jansson libcurl hiredis openssl libjwt
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS := $(shell pkg-config --libs $(PKGS) 2>/dev/null)
CHECK_CFLAGS := $(shell pkg-config --cflags check 2>/dev/null)
CHECK_LIBS := $(shell pkg-config --libs check 2>/dev/null)

WARNINGS := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
            -Wformat=2 -Wvla -Wpointer-arith -Wundef -Wnull-dereference \
            -Wno-format-truncation
GIT_COMMIT := $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
CFLAGS ?= -O2 -g
ALL_CFLAGS := -std=c11 -D_GNU_SOURCE $(WARNINGS) $(CFLAGS) $(SAN_FLAGS) -Iinclude $(PKG_CFLAGS) \
              -DFG_GIT_COMMIT='"$(GIT_COMMIT)"' -MMD -MP
LDFLAGS_ALL := $(SAN_FLAGS) $(LDFLAGS)
LIBS := $(PKG_LIBS) -lpthread -lm

# Debian packages the project needs; mk/*.mk add theirs.
DEB_PKGS := build-essential pkg-config libmicrohttpd-dev libjansson-dev libcurl4-openssl-dev \
            libhiredis-dev libssl-dev libjwt-dev check redis-server clang-format curl
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

LIB_SRC := $(wildcard src/*/*.c)
LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
LIB := $(BUILD)/libfleetgate.a
DAEMON := $(BUILD)/fleetgate

UNIT_SRC := $(wildcard tests/unit/test_*.c)
INTEG_SRC := $(wildcard tests/integration/test_*.c)
UNIT_BINS := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/unit/%)
INTEG_BINS := $(INTEG_SRC:tests/integration/%.c=$(BUILD)/tests/integration/%)
TEST_SUPPORT_SRC := $(wildcard tests/support/*.c)
TEST_SUPPORT_OBJ := $(TEST_SUPPORT_SRC:%.c=$(BUILD)/obj/%.o)
TEST_MAIN_OBJ := $(BUILD)/obj/tests/support/testmain.o

# The assembler's .incbin embeds files (cache/*.lua) that the compiler's -MMD does not see: after
# each compile, the Lua scripts a source names ("….lua") join its dependency file, as -MP would
# write them, so an object depends on its scripts in every build dir (plain, asan, fuzz).
EMBED_DEPS = for f in $$(grep -oE '"[A-Za-z0-9_./-]+\.lua\\?"' $< | tr -d '"\\' | sort -u); do \
	  [ -f "$$f" ] && printf '%s: %s\n%s:\n' '$@' "$$f" "$$f" >> $(@:.o=.d); done; true

ALL_BINS := $(DAEMON)
TEST_STEPS :=
DEMO_PREREQS :=

-include $(sort $(wildcard mk/*.mk))

# Objects are kept between builds (make would otherwise delete them as intermediates).
.SECONDARY:

.PHONY: all deps deps-ensure test check-suites asan lint format format-check banned demo clean

all: $(ALL_BINS)

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c $< -o $@
	@$(EMBED_DEPS)

$(LIB): $(LIB_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@
	ar rcs $@ $^

$(DAEMON): $(BUILD)/obj/src/main.o $(LIB)
	$(CC) $(LDFLAGS_ALL) -o $@ $^ $(LIBS)

# Every check suite, wherever it lives: tests/X/test_y.c becomes $(BUILD)/tests/X/test_y, linked
# with the runners' one main helper (tests/support/testmain.c) and the library. A group of suites
# adds its own objects and archives as prerequisites (archives link before the library).
$(BUILD)/tests/%: $(BUILD)/obj/tests/%.o $(TEST_MAIN_OBJ) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_ALL) -o $@ $(filter %.o,$^) $(filter-out $(LIB),$(filter %.a,$^)) $(LIB) \
	  $(LIBS) $(CHECK_LIBS)

$(UNIT_BINS) $(INTEG_BINS): $(TEST_SUPPORT_OBJ)

$(BUILD)/obj/tests/%.o: ALL_CFLAGS += $(CHECK_CFLAGS) -Itests/support

# ---- dependencies ---------------------------------------------------------

deps:
	$(SUDO) apt-get update
	$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $(DEB_PKGS)

# Installs only when a package is missing, so `make test` and `make demo` work on a fresh machine.
deps-ensure:
	@missing=""; for p in $(DEB_PKGS); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then echo "installing:$$missing"; $(MAKE) --no-print-directory deps; fi

# ---- tests ----------------------------------------------------------------

# Runs every check suite of this build; exits non-zero on the first failing suite.
check-suites: $(ALL_BINS) $(UNIT_BINS) $(INTEG_BINS)
	@set -e; for t in $(UNIT_BINS) $(INTEG_BINS); do \
	  echo "== $$t"; FG_BUILD=$(BUILD) $$t; \
	done

asan:
	$(MAKE) --no-print-directory SANITIZE=1 check-suites

test: deps-ensure
	$(MAKE) --no-print-directory all
	$(MAKE) --no-print-directory lint
	$(MAKE) --no-print-directory check-suites
	$(MAKE) --no-print-directory asan
	@set -e; for s in $(TEST_STEPS); do $(MAKE) --no-print-directory $$s; done
	@echo "make test: all steps passed"

# ---- lint -----------------------------------------------------------------

C_FILES = $(shell git ls-files -co --exclude-standard -- '*.c' '*.h' 2>/dev/null)

lint: format-check banned

format:
	clang-format -i $(C_FILES)

format-check:
	@clang-format --dry-run -Werror $(C_FILES) && echo "format-check: clean"

# The unsafe libc calls are banned (see ../shared/STYLE.md, habit 9).
banned:
	@if grep -nE '(^|[^_a-zA-Z0-9])(atoi|atol|atoll|sscanf|strcpy|strcat|sprintf|vsprintf|strtok|gets)[[:space:]]*\(' $(C_FILES); then \
	  echo "banned: the calls above are not allowed"; exit 1; \
	else echo "banned: none"; fi

# ---- demo -----------------------------------------------------------------

DEMO_LISTEN ?= 127.0.0.1:8080

demo: deps-ensure
	$(MAKE) --no-print-directory all $(DEMO_PREREQS)
	@echo "fleetgate demo: http://$(DEMO_LISTEN) (Ctrl-C stops it)"
	conf/demo.sh $(BUILD) $(DEMO_LISTEN)

clean:
	rm -rf build

-include $(shell find $(BUILD)/obj build/fuzz/obj -name '*.d' 2>/dev/null)
