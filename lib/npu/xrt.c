/*
 * xrt.c — the npu route's device side through XRT, built with make XRT=1 (libxrt-dev from
 * Debian: XRT 2.13, headers in /usr/include/xrt, libraries xrt_core and xrt_coreutil).
 *
 * What runs today is the probe and the opening of a device:
 *   probe  xclProbe() counts the devices XRT's drivers expose (Alveo and Versal cards bound to
 *          the xocl driver); /dev/accel/accel* is where a Ryzen AI NPU appears (the amdxdna
 *          driver), which XRT 2.13 predates: it is named in the message when present, since
 *          only a newer XRT with the XDNA plugin can drive it;
 *   open   xrtDeviceOpen(index), then the route needs a kernel design (an xclbin running Q4NX
 *          tiles against A8 rows with the epilogue and 8-partial sums of lib/arith/q4nx.h),
 *          which 1b does not ship yet: opening fails there with OB_EDEVICE, after the device
 *          was found, so the message says exactly what is missing.
 * Nothing of this could run on the machines 1b was written on (no NPU, no Alveo card): the
 * probe's "no device" path is what tests/t5060-npu.sh checks.
 *
 * Without XRT=1 the functions below report that the route is not built (route.c never calls
 * them then: its npu row has no ops).
 */
#include <stdio.h>
#include <unistd.h>

#include "backend.h"
#include "npu/npu.h"

#ifdef OB_HAVE_XRT

#include <xrt/version.h>
#include <xrt/xrt.h>
#include <xrt/xrt/xrt_device.h>

/* "/dev/accel/accel0" when such a node exists: a Ryzen AI NPU under amdxdna */
static const char *accel_node(void)
{
    static const char *const nodes[] = {"/dev/accel/accel0", "/dev/accel/accel1"};
    for (size_t i = 0; i < sizeof nodes / sizeof nodes[0]; i++)
        if (access(nodes[i], F_OK) == 0)
            return nodes[i];
    return NULL;
}

int ob_npu_xrt_probe(const struct ob_device_opts *d, struct ob_device_info *info)
{
    unsigned n = xclProbe();
    const char *accel = accel_node();
    if (n == 0 && accel)
        return ob_seterr(OB_EDEVICE, "npu: XRT %s found no device: xclProbe saw none bound to "
                         "the xocl driver (Alveo, Versal); %s exists, a Ryzen AI NPU (amdxdna), "
                         "which XRT 2.13 cannot drive (XRT 2.17 or later with the XDNA plugin "
                         "can)", xrt_build_version, accel);
    if (n == 0)
        return ob_seterr(OB_EDEVICE, "npu: XRT %s found no device: xclProbe saw none bound to "
                         "the xocl driver (Alveo, Versal), and there is no /dev/accel/accel* "
                         "(a Ryzen AI NPU, amdxdna)", xrt_build_version);
    if (d->index < 0 || (unsigned)d->index >= n)
        return ob_seterr(OB_EDEVICE, "npu: device %d: XRT %s found %u device%s", d->index,
                         xrt_build_version, n, n == 1 ? "" : "s");
    snprintf(info->name, sizeof info->name, "xrt device %d", d->index);
    info->mem_bytes = d->mem_limit;
    return 0;
}

int ob_npu_xrt_open(const struct ob_device_opts *d, void **dev)
{
    struct ob_device_info info;
    int e = ob_npu_xrt_probe(d, &info);
    if (e)
        return e;
    xrtDeviceHandle h = xrtDeviceOpen((unsigned)d->index);
    if (!h)
        return ob_seterr(OB_EDEVICE, "npu: XRT could not open device %d", d->index);
    xrtDeviceClose(h);
    *dev = NULL;
    return ob_seterr(OB_EDEVICE, "npu: device %d opened, but 1b has no kernel design (xclbin) "
                     "for Q4NX tiles on it yet; -d npu-sim runs the same arithmetic on the CPU",
                     d->index);
}

void ob_npu_xrt_close(void *dev)
{
    if (dev)
        xrtDeviceClose(dev);
}

#else

int ob_npu_xrt_probe(const struct ob_device_opts *d, struct ob_device_info *info)
{
    return ob_seterr(OB_EDEVICE, "npu: not built into this binary (make XRT=1)");
}

int ob_npu_xrt_open(const struct ob_device_opts *d, void **dev)
{
    return ob_npu_xrt_probe(d, NULL);
}

void ob_npu_xrt_close(void *dev) {}

#endif
