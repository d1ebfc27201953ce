/*
 * gpu.hip — the runtime table of the hrx route on a GPU (hrx.h): devices, streams, memory and
 * copies, from one source for CUDA (nvcc, make CUDA=1: ob_hrx_cuda_rt) and HIP (hipcc, make
 * HIP=1: ob_hrx_hip_rt); the names below map onto either API, as llama.cpp's
 * ggml-cuda/vendors/hip.h does. hrx-sim has its own table (sim.cc); this file has no hrx-sim
 * object.
 *
 * A queue is one stream on one device. Every call first makes the queue's device current on
 * the calling thread (the thread that runs a context may not be the one that opened it).
 * Launch errors are read right after each launch (OB_HRX_FN(launched)); errors of a running
 * kernel show at the next copy back or sync. Every failure is OB_EDEVICE with the runtime's
 * own words, except an allocation that does not fit (OB_ENOMEM).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hrx/shim.h"

#if defined(OB_HRX_CUDA)
#define GPU_API "cuda"
#define gpuError_t cudaError_t
#define gpuSuccess cudaSuccess
#define gpuErrorMemoryAllocation cudaErrorMemoryAllocation
#define gpuGetErrorString cudaGetErrorString
#define gpuGetLastError cudaGetLastError
#define gpuGetDeviceCount cudaGetDeviceCount
#define gpuDeviceProp cudaDeviceProp
#define gpuGetDeviceProperties cudaGetDeviceProperties
#define gpuSetDevice cudaSetDevice
#define gpuMemGetInfo cudaMemGetInfo
#define gpuStream_t cudaStream_t
#define gpuStreamCreateWithFlags cudaStreamCreateWithFlags
#define gpuStreamNonBlocking cudaStreamNonBlocking
#define gpuStreamDestroy cudaStreamDestroy
#define gpuStreamSynchronize cudaStreamSynchronize
#define gpuMalloc cudaMalloc
#define gpuFree cudaFree
#define gpuMemcpyAsync cudaMemcpyAsync
#define gpuMemsetAsync cudaMemsetAsync
#define gpuMemcpyHostToDevice cudaMemcpyHostToDevice
#define gpuMemcpyDeviceToHost cudaMemcpyDeviceToHost
#define gpuMemcpyDeviceToDevice cudaMemcpyDeviceToDevice
#define gpuGraph_t cudaGraph_t
#define gpuGraphExec_t cudaGraphExec_t
#define gpuStreamBeginCapture cudaStreamBeginCapture
#define gpuStreamCaptureModeThreadLocal cudaStreamCaptureModeThreadLocal
#define gpuStreamEndCapture cudaStreamEndCapture
#define gpuGraphInstantiate(x, g) cudaGraphInstantiate(x, g, 0)
#define gpuGraphDestroy cudaGraphDestroy
#define gpuGraphLaunch cudaGraphLaunch
#define gpuGraphExecDestroy cudaGraphExecDestroy
#define gpuEvent_t cudaEvent_t
#define gpuEventCreate cudaEventCreate
#define gpuEventDestroy cudaEventDestroy
#define gpuEventRecord cudaEventRecord
#define gpuEventSynchronize cudaEventSynchronize
#define gpuEventElapsedTime cudaEventElapsedTime
#define gpuMallocHost cudaMallocHost
#define gpuFreeHost cudaFreeHost
#elif defined(OB_HRX_HIP)
#define GPU_API "hip"
#define gpuError_t hipError_t
#define gpuSuccess hipSuccess
#define gpuErrorMemoryAllocation hipErrorOutOfMemory
#define gpuGetErrorString hipGetErrorString
#define gpuGetLastError hipGetLastError
#define gpuGetDeviceCount hipGetDeviceCount
#define gpuDeviceProp hipDeviceProp_t
#define gpuGetDeviceProperties hipGetDeviceProperties
#define gpuSetDevice hipSetDevice
#define gpuMemGetInfo hipMemGetInfo
#define gpuStream_t hipStream_t
#define gpuStreamCreateWithFlags hipStreamCreateWithFlags
#define gpuStreamNonBlocking hipStreamNonBlocking
#define gpuStreamDestroy hipStreamDestroy
#define gpuStreamSynchronize hipStreamSynchronize
#define gpuMalloc hipMalloc
#define gpuFree hipFree
#define gpuMemcpyAsync hipMemcpyAsync
#define gpuMemsetAsync hipMemsetAsync
#define gpuMemcpyHostToDevice hipMemcpyHostToDevice
#define gpuMemcpyDeviceToHost hipMemcpyDeviceToHost
#define gpuMemcpyDeviceToDevice hipMemcpyDeviceToDevice
#define gpuGraph_t hipGraph_t
#define gpuGraphExec_t hipGraphExec_t
#define gpuStreamBeginCapture hipStreamBeginCapture
#define gpuStreamCaptureModeThreadLocal hipStreamCaptureModeThreadLocal
#define gpuStreamEndCapture hipStreamEndCapture
#define gpuGraphInstantiate(x, g) hipGraphInstantiate(x, g, nullptr, nullptr, 0)
#define gpuGraphDestroy hipGraphDestroy
#define gpuGraphLaunch hipGraphLaunch
#define gpuGraphExecDestroy hipGraphExecDestroy
#define gpuEvent_t hipEvent_t
#define gpuEventCreate hipEventCreate
#define gpuEventDestroy hipEventDestroy
#define gpuEventRecord hipEventRecord
#define gpuEventSynchronize hipEventSynchronize
#define gpuEventElapsedTime hipEventElapsedTime
#define gpuMallocHost hipHostMalloc
#define gpuFreeHost hipHostFree
#else
#error "gpu.hip is compiled by nvcc or hipcc only"
#endif

/* OB_HRX_PROFILE=1: every launch and copy is waited for, and the wall time since the previous
 * one is added to its name's line; the table goes to stderr when the queue closes. The time of
 * an op includes the host's work before it (sampling shows in the first copy of a step).
 * OB_HRX_PROFILE=events: nothing is waited for; an event is recorded on the stream after each
 * launch and copy, and the stream's time from the previous event to it goes to its line when
 * the queue next waits (a copy back, a sync, the close): the kernels' own times without a
 * wait's cost each, and a launch that the host queued late shows the GPU's idle time before
 * it. Graphs are off under either (the ops are timed one by one). */
#define PROF_MAX 96
#define PROF_EVENTS 4096           /* events held between two waits */
struct gpu_stat {
    char name[56];
    long calls;
    double sec;
};

struct gpu_queue {
    int dev;
    int cc;                        /* compute capability, 10 major + minor (CUDA; 0 on HIP) */
    int sms;                       /* multiprocessors */
    float *ws;                     /* the workspace (shim.h), NULL if it could not be had */
    unsigned *ctr;                 /* OB_HRX_CTRS arrival counters (shim.h), or NULL */
    gpuStream_t s;
    bool prof;
    bool events;                   /* OB_HRX_PROFILE=events */
    double t_last;
    int n_ev;                      /* events recorded since the last wait */
    int ev_stat[PROF_EVENTS];      /* event i closes an op of line ev_stat[i] */
    gpuEvent_t ev[PROF_EVENTS], ev_prev;   /* created when first needed; ev_prev: the last timed */
    int n_stat;
    gpu_stat stat[PROF_MAX];
};

static gpu_queue *Q(ob_hrx_q *q) { return (gpu_queue *)q; }

static double now_sec(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

bool OB_HRX_FN(profiling)(struct ob_hrx_q *q) { return Q(q)->prof; }

#if defined(OB_HRX_CUDA)
/* mma.sync's int8 shapes came with sm_80 */
bool OB_HRX_FN(has_mma)(struct ob_hrx_q *q) { return Q(q)->cc >= 80; }
#endif

int OB_HRX_FN(sms)(struct ob_hrx_q *q) { return Q(q)->sms; }

float *OB_HRX_FN(workspace)(struct ob_hrx_q *q, size_t *n)
{
    *n = Q(q)->ws ? OB_HRX_WS_FLOATS : 0;
    return Q(q)->ws;
}

unsigned *OB_HRX_FN(counters)(struct ob_hrx_q *q, int *n)
{
    *n = Q(q)->ctr ? OB_HRX_CTRS : 0;
    return Q(q)->ctr;
}

/* the line of `name` in the profile's table */
static int prof_line(gpu_queue *g, const char *name)
{
    int i = 0;
    while (i < g->n_stat && strcmp(g->stat[i].name, name))
        i++;
    if (i == g->n_stat) {
        if (i == PROF_MAX) {       /* the last line takes whatever does not fit */
            i = PROF_MAX - 1;
            snprintf(g->stat[i].name, sizeof g->stat[i].name, "(other ops)");
        } else {
            snprintf(g->stat[g->n_stat++].name, sizeof g->stat[i].name, "%s", name);
        }
    }
    return i;
}

/* events: wait for the stream, then charge each event's time since the one before it */
static void prof_flush(gpu_queue *g)
{
    if (!g->events || !g->n_ev)
        return;
    (void)gpuEventSynchronize(g->ev[g->n_ev - 1]);
    for (int i = 0; i < g->n_ev; i++) {
        float ms = 0.0f;
        if (gpuEventElapsedTime(&ms, i ? g->ev[i - 1] : g->ev_prev, g->ev[i]) == gpuSuccess)
            g->stat[g->ev_stat[i]].sec += 1e-3 * ms;
    }
    gpuEvent_t last = g->ev[g->n_ev - 1];  /* the next flush times from it */
    g->ev[g->n_ev - 1] = g->ev_prev;
    g->ev_prev = last;
    g->n_ev = 0;
    (void)gpuGetLastError();
}

/* profiling: the time of the op just queued, charged to `name` (prof_flush, or a wait now) */
static void prof_mark(gpu_queue *g, const char *name)
{
    if (!g->prof)
        return;
    int i = prof_line(g, name);
    g->stat[i].calls++;
    if (g->events) {
        if (g->n_ev == PROF_EVENTS)
            prof_flush(g);
        if (!g->ev[g->n_ev] && gpuEventCreate(&g->ev[g->n_ev]) != gpuSuccess) {
            (void)gpuGetLastError();
            return;
        }
        (void)gpuEventRecord(g->ev[g->n_ev], g->s);
        g->ev_stat[g->n_ev++] = i;
        return;
    }
    (void)gpuStreamSynchronize(g->s);
    double t = now_sec();
    g->stat[i].sec += t - g->t_last;
    g->t_last = t;
}

static int stat_cmp(const void *a, const void *b)
{
    double x = ((const gpu_stat *)a)->sec, y = ((const gpu_stat *)b)->sec;
    return x < y ? 1 : x > y ? -1 : 0;
}

static void prof_print(gpu_queue *g)
{
    double total = 0;
    for (int i = 0; i < g->n_stat; i++)
        total += g->stat[i].sec;
    if (!g->prof || total <= 0)
        return;
    qsort(g->stat, (size_t)g->n_stat, sizeof g->stat[0], stat_cmp);
    fprintf(stderr, "hrx profile (%s %d, OB_HRX_PROFILE=%s): %.1f ms in all\n"
            "  %-44s %9s %11s %10s %6s\n", GPU_API, g->dev, g->events ? "events" : "1",
            1e3 * total, "op", "calls",
            "total ms", "mean us", "%");
    for (int i = 0; i < g->n_stat; i++)
        fprintf(stderr, "  %-44s %9ld %11.2f %10.2f %6.2f\n", g->stat[i].name, g->stat[i].calls,
                1e3 * g->stat[i].sec, 1e6 * g->stat[i].sec / (double)g->stat[i].calls,
                100.0 * g->stat[i].sec / total);
}

/* OB_EDEVICE naming the call and the runtime's error (0 for success) */
static int check(gpuError_t err, const char *what)
{
    if (err == gpuSuccess)
        return 0;
    return ob_seterr(err == gpuErrorMemoryAllocation ? OB_ENOMEM : OB_EDEVICE,
                     "hrx: %s %s: %s", GPU_API, what, gpuGetErrorString(err));
}

ob_gpu_stream_t OB_HRX_FN(stream)(struct ob_hrx_q *q)
{
    (void)gpuSetDevice(Q(q)->dev);
    return Q(q)->s;
}

extern "C" int OB_HRX_FN(launched)(struct ob_hrx_q *q, const char *kernel)
{
    int e = check(gpuGetLastError(), kernel);
    prof_mark(Q(q), kernel);
    return e;
}

static int gpu_count(void)
{
    int n = 0;
    gpuError_t err = gpuGetDeviceCount(&n);
    if (err != gpuSuccess) {
        (void)gpuGetLastError();         /* not sticky: a later call may succeed */
        return ob_seterr(OB_EDEVICE, "%s", gpuGetErrorString(err));
    }
    return n;
}

static int gpu_info(int index, ob_hrx_devinfo *out)
{
    gpuDeviceProp p;
    int e;
    memset(out, 0, sizeof *out);
    if ((e = check(gpuGetDeviceProperties(&p, index), "device properties")))
        return e;
    snprintf(out->name, sizeof out->name, "%s", p.name);
    out->mem_bytes = p.totalGlobalMem;
    size_t fr = 0, total = 0;
    if (gpuSetDevice(index) == gpuSuccess && gpuMemGetInfo(&fr, &total) == gpuSuccess)
        out->free_bytes = fr;
    (void)gpuGetLastError();
    return 0;
}

static void gpu_close(ob_hrx_q *q)
{
    if (!q)
        return;
    gpu_queue *g = Q(q);
    (void)gpuSetDevice(g->dev);
    prof_flush(g);
    prof_print(g);
    for (int i = 0; i < PROF_EVENTS && g->ev[i]; i++)
        (void)gpuEventDestroy(g->ev[i]);
    if (g->ws)
        (void)gpuFree(g->ws);
    if (g->ctr)
        (void)gpuFree(g->ctr);
    if (g->ev_prev)
        (void)gpuEventDestroy(g->ev_prev);
    (void)gpuStreamDestroy(g->s);
    free(q);
}

static int gpu_open(int index, int n_threads, ob_hrx_q **out)
{
    gpu_queue *g = (gpu_queue *)calloc(1, sizeof *g);
    if (!g)
        return ob_seterr(OB_ENOMEM, "out of memory");
    g->dev = index;
    int e;
    if ((e = check(gpuSetDevice(index), "set device")) ||
        (e = check(gpuStreamCreateWithFlags(&g->s, gpuStreamNonBlocking), "stream"))) {
        free(g);
        return e;
    }
    gpuDeviceProp p;
    if (gpuGetDeviceProperties(&p, index) == gpuSuccess) {
#if defined(OB_HRX_CUDA)
        g->cc = 10 * p.major + p.minor;
#endif
        g->sms = p.multiProcessorCount;
    }
    /* unknown: no tensor-core product (dp4a tiles), no split products; no workspace: the same */
    if (gpuMalloc((void **)&g->ws, OB_HRX_WS_FLOATS * sizeof(float)) != gpuSuccess)
        g->ws = NULL;
    /* zeroed in the stream's order, before any launch; none: each product's `then` is a
     * launch of its own */
    if (gpuMalloc((void **)&g->ctr, OB_HRX_CTRS * sizeof(unsigned)) != gpuSuccess)
        g->ctr = NULL;
    else if (gpuMemsetAsync(g->ctr, 0, OB_HRX_CTRS * sizeof(unsigned), g->s) != gpuSuccess) {
        (void)gpuFree(g->ctr);
        g->ctr = NULL;
    }
    (void)gpuGetLastError();
    const char *pr = getenv("OB_HRX_PROFILE");
    g->prof = pr && *pr && strcmp(pr, "0");
    g->events = g->prof && !strcmp(pr, "events");
    g->t_last = now_sec();
    if (g->events && (gpuEventCreate(&g->ev_prev) != gpuSuccess ||
                      gpuEventRecord(g->ev_prev, g->s) != gpuSuccess)) {
        (void)gpuGetLastError();
        g->events = g->prof = false;   /* no events: no profile, rather than a wrong one */
    }
    *out = (ob_hrx_q *)g;
    return 0;
}

static int gpu_alloc(ob_hrx_q *q, size_t bytes, void **out)
{
    (void)gpuSetDevice(Q(q)->dev);
    char what[64];
    snprintf(what, sizeof what, "malloc of %zu bytes", bytes);
    return check(gpuMalloc(out, bytes), what);
}

static void gpu_free(ob_hrx_q *q, void *p)
{
    (void)gpuSetDevice(Q(q)->dev);
    (void)gpuFree(p);
}

/* page-locked host memory: a copy from the device into plain memory goes through a staging
 * buffer (the 19 MB of logits at width 32 took ~2.2 ms on an H200) */
static int gpu_host_alloc(ob_hrx_q *q, size_t bytes, void **out)
{
    (void)gpuSetDevice(Q(q)->dev);
    char what[64];
    snprintf(what, sizeof what, "page-locked host memory of %zu bytes", bytes);
    int e = check(gpuMallocHost(out, bytes), what);
    if (e)
        (void)gpuGetLastError();   /* not left for a launch's check to find */
    return e;
}

static void gpu_host_free(ob_hrx_q *q, void *p)
{
    (void)gpuSetDevice(Q(q)->dev);
    (void)gpuFreeHost(p);
}

static int gpu_h2d(ob_hrx_q *q, void *dst, const void *src, size_t n)
{
    (void)gpuSetDevice(Q(q)->dev);
    int e = n ? check(gpuMemcpyAsync(dst, src, n, gpuMemcpyHostToDevice, Q(q)->s), "copy to device")
              : 0;
    prof_mark(Q(q), "copy to device");
    return e;
}

static int gpu_d2h(ob_hrx_q *q, void *dst, const void *src, size_t n)
{
    (void)gpuSetDevice(Q(q)->dev);
    int e = n ? check(gpuMemcpyAsync(dst, src, n, gpuMemcpyDeviceToHost, Q(q)->s), "copy to host")
              : 0;
    e = e ? e : check(gpuStreamSynchronize(Q(q)->s), "sync");
    prof_mark(Q(q), "copy to host");
    prof_flush(Q(q));
    return e;
}

static int gpu_d2d(ob_hrx_q *q, void *dst, const void *src, size_t n)
{
    (void)gpuSetDevice(Q(q)->dev);
    int e = n ? check(gpuMemcpyAsync(dst, src, n, gpuMemcpyDeviceToDevice, Q(q)->s), "copy")
              : 0;
    prof_mark(Q(q), "copy on device");
    return e;
}

static int gpu_sync(ob_hrx_q *q)
{
    (void)gpuSetDevice(Q(q)->dev);
    int e = check(gpuStreamSynchronize(Q(q)->s), "sync");
    prof_mark(Q(q), "sync");
    prof_flush(Q(q));
    return e;
}

/* graphs: stream capture (thread-local: only this thread's launches on the stream) */
static int gpu_graph_begin(ob_hrx_q *q)
{
    if (Q(q)->prof)                /* profiling waits after each launch: no capture then */
        return ob_seterr(OB_EUNSUPP, "hrx: no graphs while OB_HRX_PROFILE is set");
    (void)gpuSetDevice(Q(q)->dev);
    return check(gpuStreamBeginCapture(Q(q)->s, gpuStreamCaptureModeThreadLocal), "graph capture");
}

static int gpu_graph_end(ob_hrx_q *q, void **graph)
{
    gpuGraph_t g = NULL;
    gpuGraphExec_t x = NULL;
    *graph = NULL;
    (void)gpuSetDevice(Q(q)->dev);
    int e = check(gpuStreamEndCapture(Q(q)->s, &g), "graph capture");
    if (!e)
        e = check(gpuGraphInstantiate(&x, g), "graph instantiation");
    if (g)
        (void)gpuGraphDestroy(g);
    if (!e)
        *graph = (void *)x;
    return e;
}

static int gpu_graph_launch(ob_hrx_q *q, void *graph)
{
    (void)gpuSetDevice(Q(q)->dev);
    return check(gpuGraphLaunch((gpuGraphExec_t)graph, Q(q)->s), "graph launch");
}

static void gpu_graph_free(ob_hrx_q *q, void *graph)
{
    (void)gpuSetDevice(Q(q)->dev);
    if (graph)
        (void)gpuGraphExecDestroy((gpuGraphExec_t)graph);
}

#if !defined(__HIP_DEVICE_COMPILE__)        /* host code only (table.hip says why) */
extern "C" const ob_hrx_rt OB_HRX_FN(rt) = {
    GPU_API, gpu_count, gpu_info, gpu_open, gpu_close, gpu_alloc, gpu_free,
    gpu_h2d, gpu_d2h, gpu_d2d, gpu_sync,
    gpu_graph_begin, gpu_graph_end, gpu_graph_launch, gpu_graph_free,
    false, &OB_HRX_FN(kernels), gpu_host_alloc, gpu_host_free,
};
#endif
