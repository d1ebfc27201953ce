/*
 * agree.h — comparing token streams: what 1b-agree and 1b-batchrep measure (agree.c).
 *
 * A stream is the tokens of one result record (1b(7), RECORDS), read into a struct
 * ob_agree_rec: per position the token (id, or only its text when a server reported no ids),
 * the float32 log-probability of the chosen token and its top alternatives. Every quantity is
 * defined on these structs, whatever route produced them:
 *
 *   aligned   positions both streams have: min(len_a, len_b), summed over records
 *   common    aligned positions that carry the same token (by id, or by text: --match-by)
 *   exact     common positions whose two log-probabilities have the same float32 bits
 *   token match rate   common / aligned;   exact-bit rate   exact / common
 *   |dlogp|   |(double)a - (double)b| of the chosen token's log-probabilities, over common
 *             positions only (at other positions it would compare different tokens); max and
 *             mean (sum in record order, then position order, divided by common)
 *   first divergence   the first aligned position whose tokens differ (or, when none does and
 *             the lengths differ, the end of the shorter stream), with each stream's top-2
 *             margin there: the logprob of its top-1 minus that of its top-2, from its own
 *             top list (unknown when the list has fewer than two entries)
 *   identical two streams of the same length with the same token, the same log-probability
 *             bits and the same top list (tokens and bits) at every position
 *   fingerprint  a 64-bit FNV-1a hash of everything `identical` compares; a state is a class
 *             of identical streams (states are counted by comparing streams, not hashes)
 *
 * Ownership: a struct ob_agree_rec owns its arrays (ob_agree_rec_free); a set owns its
 * records; cJSON reports belong to the caller. Threads: no shared state; distinct objects may
 * be used from distinct threads.
 */
#ifndef OB_AGREE_H
#define OB_AGREE_H

#include "1b.h"
#include "sample.h"

enum ob_match { OB_MATCH_ID = 0, OB_MATCH_TEXT = 1 };
/* --match-by's words */
extern const struct ob_opt_word ob_agree_match_words[];

struct ob_agree_top {
    int32_t id;                    /* -1 when the route reported none */
    char *key;                     /* the token's bytes (or text), for matching by text */
    size_t key_len;
    float lp;
};

struct ob_agree_tok {
    int32_t id;                    /* -1 when the route reported none */
    char *key;                     /* "bytes" when the record has them, else "text" (UTF-8) */
    size_t key_len;
    bool has_key;                  /* false: neither bytes nor text */
    bool has_lp;                   /* false: the record carries no log-probability here */
    float lp;
    int n_top;
    struct ob_agree_top *top;
};

struct ob_agree_rec {
    char *id;
    int64_t repeat;
    char *route;                   /* NULL when the record names none */
    char *error;                   /* the record's "error" field, NULL if none */
    uint64_t line;                 /* where it was read (0 if not from a file) */
    int n;
    struct ob_agree_tok *t;
    int64_t nonf32;                /* values that were not exactly float32 (incl. the record's
                                      own "nonf32_values" count) */
    int64_t missing_lp;            /* tokens without a log-probability */
    int64_t no_id;                 /* tokens without an id */
};

/* A result record (cJSON) -> stream. OB_EFORMAT with the reason (which token, which field)
 * when the record is not a result record: no id, no tokens and no error, a token without id
 * and text, a log-probability that is not a number, bits that disagree with the decimal. */
int ob_agree_rec_from_json(const cJSON *rec, struct ob_agree_rec *out);
/* The same reader for a record's "tokens" array alone (1b-logprobs reads the tokens it scores
 * with it): appended to out's t[], n, nonf32, missing_lp and no_id (out zeroed first, freed
 * with ob_agree_rec_free whatever the result); OB_EFORMAT naming the token and the field. */
int ob_agree_tokens_from_json(const cJSON *tokens, struct ob_agree_rec *out);
/* In-process tokens (engine callbacks) -> stream, with no text (matched by id). */
int ob_agree_rec_from_info(const struct ob_token_info *t, int n, bool logprobs,
                           struct ob_agree_rec *out);
void ob_agree_rec_free(struct ob_agree_rec *r);

/* One input: every record of a file, in file order. */
struct ob_agree_set {
    char *name;                    /* as given ("-" for standard input) */
    int n;
    struct ob_agree_rec *recs;
};
/* Read every record; OB_EFORMAT "NAME:LINE: reason" on the first bad one, OB_EIO on a read
 * error. */
int ob_agree_read(FILE *f, const char *name, struct ob_agree_set **out);
void ob_agree_set_free(struct ob_agree_set *s);

bool ob_agree_same_token(const struct ob_agree_tok *a, const struct ob_agree_tok *b, int match);
bool ob_agree_identical(const struct ob_agree_rec *a, const struct ob_agree_rec *b, int match);
uint64_t ob_agree_fingerprint(const struct ob_agree_rec *r, int match);
/* top-1 minus top-2 of a position's own top list; false when it has fewer than two */
bool ob_agree_margin(const struct ob_agree_tok *t, double *margin);

/* The comparison of two streams (definitions above). */
struct ob_agree_cmp {
    int64_t len_a, len_b, aligned, common, exact, top_diff;
    int64_t n_lp;                  /* common positions with a log-probability on both sides:
                                      exact and |dlogp| are over these */
    double sum_abs, max_abs;       /* max_abs is 0 with none */
    int64_t max_pos;               /* where max_abs was first reached; -1 with no common */
    int64_t div_pos;               /* first divergence; -1 when the streams never diverge */
    bool identical;
};
void ob_agree_cmp_recs(const struct ob_agree_rec *a, const struct ob_agree_rec *b, int match,
                       struct ob_agree_cmp *c);

/* ---- 1b-agree -------------------------------------------------------------------------------- */

struct ob_agree_opts {
    int match;                     /* enum ob_match */
    bool all_repeats;              /* pair every repeat index both inputs have, not the lowest */
    bool gated;                    /* any gate given: pass on the gates, not on exactness */
    double max_abs, mean_abs;      /* gates; < 0: not given */
    double min_match;              /* token match rate gate; < 0: not given */
};

/*
 * Compare n >= 1 inputs: each input's repetition (every repeat of an id identical to its
 * lowest repeat), then every pair (i < j) over the ids both have. The report (a cJSON object,
 * documented in 1b-agree(1)) has "inputs", "pairs", "match_by", "gates" and "verdict";
 * *differs is set when an input is not repeatable, has records without log-probabilities, a
 * pair misses records or is not exact (within the gates when gated).
 */
int ob_agree_compare(struct ob_agree_set *const *sets, int n, const struct ob_agree_opts *o,
                     cJSON **report, bool *differs);

/* ---- 1b-batchrep ----------------------------------------------------------------------------- */

/*
 * copies[round * width + k] is copy k of round r. The report (1b-batchrep(1)) counts
 * distinct states over all copies, per round the states of its copies and the largest group
 * of identical ones, the same-index pairs identical between consecutive rounds, and the worst
 * |dlogp| between any two states (over their common positions). With solo (NULL: none) every
 * copy is also scored against it: identical copies, mean |dlogp| per copy (min, median, max),
 * the share of aligned positions that keep the solo token (min, median, max). *states is the
 * number of distinct states; *solo_identical the copies identical to the solo stream.
 */
int ob_batchrep_report(const struct ob_agree_rec *copies, int width, int rounds,
                       const struct ob_agree_rec *solo, int match, cJSON **report, int *states,
                       int *solo_identical);

#endif
