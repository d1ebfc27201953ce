/*
 * ob-inline.h — the one macro that lets a header of static inline functions compile unchanged
 * as host C (gcc, clang) and as GPU code (hipcc, nvcc).
 */
#ifndef OB_INLINE_H
#define OB_INLINE_H

#if defined(__CUDACC__) || defined(__HIPCC__)
#define OB_INLINE static inline __host__ __device__
#else
#define OB_INLINE static inline
#endif

#endif
