/*
 * ob-inline.h — the two macros that let the headers of lib/arith/ compile unchanged as host C
 * (gcc, clang) and as GPU code (hipcc, nvcc: CUDA/HIP C++):
 *   OB_INLINE                a function every compiler of the project builds, for the host and,
 *                            under nvcc and hipcc, for the device too;
 *   OB_STATIC_ASSERT(c, m)   a compile-time check (C11 _Static_assert, C++ static_assert).
 */
#ifndef OB_INLINE_H
#define OB_INLINE_H

#if defined(__CUDACC__) || defined(__HIPCC__)
#define OB_INLINE static inline __host__ __device__
#else
#define OB_INLINE static inline
#endif

#ifdef __cplusplus
#define OB_STATIC_ASSERT(c, m) static_assert(c, m)
#else
#define OB_STATIC_ASSERT(c, m) _Static_assert(c, m)
#endif

#endif
