/*
 * cpu-has — whether this CPU runs code compiled with some x86 extensions, as lib/host/simd.c
 * sees it (CPUID and the OS's XCR0; OB_CPU_LACKS=avx2|avx512 takes levels away): how the tests
 * tell a program built with flags this CPU cannot execute (skipped: "cpu lacks LEVEL") from
 * one that crashed (tests/lib.sh: isa_lacks).
 *
 *   cpu-has NAME...     NAME as the compilers spell the extension: avx2, f16c, avx512vnni, ...
 *
 * Exit 0 when the CPU has every NAME that a SIMD level's flags enable (lib/host/simd.c's table;
 * a NAME outside it is not judged here and does not count); 1 when it lacks one, printing
 * "LEVEL NAME" for the lowest level it lacks and the first NAME of it; 2 for no NAME, or an
 * OB_CPU_LACKS that names no level.
 */
#include <stdio.h>

#include "1b.h"
#include "host/simd.h"

int main(int argc, char **argv)
{
    int lacks, worst = OB_ISA_COUNT;
    const char *which = NULL;
    if (argc < 2) {
        fprintf(stderr, "usage: cpu-has NAME...\n");
        return 2;
    }
    if (ob_cpu_lacks(&lacks)) {
        fprintf(stderr, "cpu-has: %s\n", ob_errmsg());
        return 2;
    }
    for (int i = 1; i < argc; i++) {
        int level;
        if (ob_cpu_has(argv[i], &level) == 0 && level < worst) {
            worst = level;
            which = argv[i];
        }
    }
    if (!which)
        return 0;
    printf("%s %s\n", ob_isa_name(worst), which);
    return 1;
}
