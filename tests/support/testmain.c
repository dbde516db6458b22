/* tests/support/testmain.c: runs a check suite and turns its result into an exit status. */
#include "testmain.h"

#include <stdbool.h>

static int run(Suite *s, bool nofork) {
    SRunner *sr = srunner_create(s);
    if (nofork)
        srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}

int tm_run(Suite *s) {
    return run(s, false);
}

int tm_run_nofork(Suite *s) {
    return run(s, true);
}
