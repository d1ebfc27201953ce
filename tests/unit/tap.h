/*
 * tap.h — what every C unit test shares: TAP output and a seeded random generator.
 *
 *   ok(cond, "what %s", ...)   one TAP line; failures are counted
 *   tap_done()                 prints the plan; returns the exit status (0: all passed)
 *   tap_seed(s), tap_rand()    splitmix64: the same numbers on every machine
 */
#ifndef OB_TAP_H
#define OB_TAP_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>

static int n_test, n_fail;

static void ok(int cond, const char *fmt, ...) __attribute__((format(printf, 2, 3), unused));
static void ok(int cond, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("%s %d - ", cond ? "ok" : "not ok", ++n_test);
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    if (!cond)
        n_fail++;
}

static int __attribute__((unused)) tap_done(void)
{
    printf("1..%d\n", n_test);
    return n_fail ? 1 : 0;
}

static uint64_t tap_state = 0x9e3779b97f4a7c15ull;

static void __attribute__((unused)) tap_seed(uint64_t s)
{
    tap_state = s;
}

static uint64_t __attribute__((unused)) tap_rand(void)
{
    uint64_t z = (tap_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

#endif
