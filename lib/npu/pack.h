/*
 * pack.h — writing Q4NX packs (pack.c), internal to lib/; reading them is public (1b.h).
 *
 * A pack is written into a temporary directory beside its final name and renamed into place
 * only when every file is complete and synced, so a failure never leaves a partial pack under
 * the final name (the same rule as the GGUF writer's temporary file).
 *
 *   ob_pack_writer_new(DIR)            creates DIR.tmp.XXXXXX
 *   ob_pack_writer_dir(w)              where the caller writes the meta GGUF (PACK_META)
 *   ob_pack_writer_add(w, ...)         appends one Q4NX tensor to PACK_WEIGHTS, in order
 *   ob_pack_writer_finish(w, info)     hashes the meta file, writes manifest.json, renames
 *   ob_pack_writer_free(w)             removes the temporary directory if not finished
 *
 * One writer, one thread.
 */
#ifndef OB_NPU_PACK_H
#define OB_NPU_PACK_H

#include "1b.h"

#define PACK_MANIFEST "manifest.json"
#define PACK_META "meta.gguf"
#define PACK_WEIGHTS "weights.q4nx"
#define PACK_FORMAT "1b-q4nx"
#define PACK_ALIGN 4096            /* each tensor's offset in PACK_WEIGHTS: a page, for DMA */

struct ob_pack_writer;

int ob_pack_writer_new(const char *dir, struct ob_pack_writer **out);
void ob_pack_writer_free(struct ob_pack_writer *w);
const char *ob_pack_writer_dir(const struct ob_pack_writer *w);
/* n rows of k values (k a multiple of 32) as Q4NX tiles, nbytes = n * k / 32 * 20; from: the
 * source tensor's type, recorded in the manifest */
int ob_pack_writer_add(struct ob_pack_writer *w, const char *name, uint64_t k, uint64_t n,
                       const void *tiles, uint64_t nbytes, uint32_t from);
/*
 * info: the manifest's descriptive members (architecture, name, hparams, source, ...), copied;
 * the writer adds format, version, meta, files and tensors. replace: an existing pack at DIR
 * (a directory whose manifest.json names the format) is replaced; anything else there is an
 * error. On success the manifest's sha256 (the pack's identity) goes to sha256 (may be NULL).
 */
int ob_pack_writer_finish(struct ob_pack_writer *w, const cJSON *info, bool replace,
                          char sha256[65]);

#endif
