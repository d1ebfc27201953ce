/*
 * cli.h — what a command does with the outcome of its option loop (struct ob_cmdline, 1b.h):
 * lib/ never prints, so the commands write its answers and reasons here. Header-only, for
 * cmd/ and bench/.
 */
#ifndef OB_CMD_CLI_H
#define OB_CMD_CLI_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "1b.h"

/* After a stop (--help, --version, --list-options, or a failure to answer): the answer on
 * stdout, or the failure on stderr; the exit status (an answer that did not reach stdout is a
 * failure, exit 5, not a success). */
static inline int cli_answer(struct ob_cmdline *cl)
{
    int status = cl->status;
    if (!status && cl->answer) {
        errno = 0;
        if (fputs(cl->answer, stdout) == EOF || fflush(stdout) != 0 || ferror(stdout)) {
            fprintf(stderr, "%s: stdout: %s\n", cl->prog, errno ? strerror(errno) : "write error");
            status = OB_EXIT_FAILURE;
        }
    } else if (status) {
        fprintf(stderr, "%s: %s\n", cl->prog, cl->msg[0] ? cl->msg : "out of memory");
    }
    free(cl->answer);
    cl->answer = NULL;
    return status;
}

/* why the command line is bad, as the loop found it (a generic reason when none was
 * recorded) */
static inline const char *cli_reason(const struct ob_cmdline *cl)
{
    return cl->msg[0] ? cl->msg : "invalid command line";
}

/* that reason as "PROG: why" on stderr */
static inline void cli_bad(const struct ob_cmdline *cl)
{
    fprintf(stderr, "%s: %s\n", cl->prog, cli_reason(cl));
}

/* --list-types (1b-synth, 1b-requant; the completions ask it): the list on stdout, closed; the
 * exit status (a list that did not reach stdout is a failure) */
static inline int cli_list_types(const struct ob_cmdline *cl, bool packs)
{
    ob_list_types(stdout, packs);
    int e = ob_stdout_close();
    if (e)
        fprintf(stderr, "%s: %s\n", cl->prog, ob_errmsg());
    return ob_exit_status(e);
}

#endif
