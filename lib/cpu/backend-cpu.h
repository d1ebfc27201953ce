/*
 * backend-cpu.h — what a route built on the cpu route sees of it (internal to lib/).
 *
 * The npu routes (lib/npu/backend-npu.c) run every op of the forward pass but the matmuls and
 * the logits on an instance of the cpu route, so those ops are the cpu route's bits by
 * construction; they read and write its buffers through this view.
 */
#ifndef OB_BACKEND_CPU_H
#define OB_BACKEND_CPU_H

#include "backend.h"
#include "host/pool.h"

struct ob_cpu_view {
    int isa;                       /* enum ob_isa, the level the instance runs */
    struct ob_pool *pool;          /* its threads */
    float *const *buf;             /* [OB_BCOUNT]: row-major [max_rows][width[b]] */
    const int *width;              /* [OB_BCOUNT] */
};

/* the view of an instance opened with ob_be_cpu.open */
void ob_be_cpu_view(struct ob_be *be, struct ob_cpu_view *v);
/* buffer b was written outside the cpu ops (drops what the instance derived from it) */
void ob_be_cpu_wrote(struct ob_be *be, int b);

#endif
