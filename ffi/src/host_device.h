/*
 * RILL_HD marks a function that both the host and a CUDA device run: `__host__ __device__` where CUDA code is
 * compiled (nvcc, or the host emulation of ffi/tests/cuda_emu, whose cuda_runtime.h defines both as nothing), and
 * nothing for the C compiler. Headers that the CPU device and the CUDA device share (sample_rules.h, philox.h) define
 * their functions `static inline RILL_HD`, so one text is compiled for each.
 */
#ifndef RILL_HOST_DEVICE_H
#define RILL_HOST_DEVICE_H

#if defined(__CUDACC__) || defined(RILL_CUDA_EMU)
#define RILL_HD __host__ __device__
#else
#define RILL_HD
#endif

#endif /* RILL_HOST_DEVICE_H */
