/* check.c — the portable arithmetic check as C (gcc, clang): prints the hash of all results. */
#include "check.inc"

int main(void)
{
    printf("%016llx\n", (unsigned long long)run_checks());
    return 0;
}
