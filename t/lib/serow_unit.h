/*
 * serow_unit.h - what every C test program under t/ shares: its checks, each
 * a line "ok - NAME" or "not ok - NAME" that Serow::Test::CProgram::report
 * turns into a Test::More test, the count of those that failed (the
 * program's exit status), and a pseudo-random sequence that is the same on
 * every run, so that a failure found once is found again.
 *
 * Header only (Serow::Test::CProgram puts t/lib on every test program's
 * include path): a test program is one .c file with the sources it tests.
 */
#ifndef SEROW_UNIT_H
#define SEROW_UNIT_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>

static int unit_checks, unit_failures;

/* One check: its line, printed at once (flushed, so that the lines before a
 * crash are all there to read). */
__attribute__((format(printf, 2, 3))) static inline void check(int ok, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("%s - ", ok ? "ok" : "not ok");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    fflush(stdout);
    unit_checks++;
    unit_failures += !ok;
}

/* Whether a check has failed so far (for printing what helps to see why). */
static inline int checks_failed(void)
{
    return unit_failures;
}

/* The end of the checks: a line counting them, and main's exit status (1
 * when one failed, so that the run fails even if a line was lost). */
static inline int checks_done(void)
{
    printf("# %d checks, %d failed\n", unit_checks, unit_failures);
    return unit_failures ? 1 : 0;
}

/* xorshift64, from a fixed seed. */
static uint64_t unit_rnd_state = 88172645463325252ULL;

static inline uint64_t rnd(void)
{
    unit_rnd_state ^= unit_rnd_state << 13;
    unit_rnd_state ^= unit_rnd_state >> 7;
    unit_rnd_state ^= unit_rnd_state << 17;
    return unit_rnd_state;
}

#endif
