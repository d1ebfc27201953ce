/*
 * table.hip — the launchers of one target as the table the host side calls (hrx.h):
 * ob_hrx_sim_kernels, ob_hrx_cuda_kernels or ob_hrx_hip_kernels, by the compiler that builds it.
 */
#include "hrx/shim.h"

/* host code only: hipcc would also place a constant-initialised const object in device memory
 * (__HIP_DEVICE_COMPILE__ is its device pass) */
#if !defined(__HIP_DEVICE_COMPILE__)
#define OB_HRX_ENTRY(name, params) OB_HRX_FN(name),
extern "C" const struct ob_hrx_kernels OB_HRX_FN(kernels) = {OB_HRX_KERNELS(OB_HRX_ENTRY)};
#endif
