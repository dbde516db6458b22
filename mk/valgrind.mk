# The hot paths under valgrind (memcheck): the HTTP server suite (request lifecycle, router,
# replies, draining) and the core suite run with leak checking; any error fails `make test`.
# check forks one child per test, so valgrind follows children.

DEB_PKGS += valgrind
VALGRIND_SUITES ?= $(BUILD)/tests/unit/test_core $(BUILD)/tests/unit/test_http \
                   $(BUILD)/tests/integration/test_http_server $(BUILD)/tests/unit/test_ratelimit \
                   $(BUILD)/tests/integration/test_mirror
# (test_ratelimit and test_mirror start a redis-server: that child is not ours to check, and too
# slow under it)
VALGRIND := valgrind --quiet --trace-children=yes --trace-children-skip='*redis-server*' \
            --error-exitcode=99 --leak-check=full \
            --errors-for-leak-kinds=definite,indirect --child-silent-after-fork=no

.PHONY: valgrind
TEST_STEPS += valgrind

valgrind: $(VALGRIND_SUITES)
	@set -e; for t in $(VALGRIND_SUITES); do echo "== valgrind $$t"; $(VALGRIND) $$t; done
