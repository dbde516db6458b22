/* tests/support/testmain.h: the one way a check runner runs its suite. Every test_*.c (unit,
 * integration, kubesim) has a main() of one line, `return tm_run(x_suite());`. */
#ifndef FG_TESTMAIN_H
#define FG_TESTMAIN_H

#include <check.h>

/* Runs every test of s with check's normal output, forking one child per test (unless CK_FORK=no
 * in the environment), and frees the runner and s. Returns the process's exit status: 0 when
 * every test passed, 1 otherwise. */
int tm_run(Suite *s);
/* The same in this process, with no child per test (a crash ends the run): test_kube_translate's
 * golden-file update mode runs so. */
int tm_run_nofork(Suite *s);

#endif
