/*
 * A host emulation of the slice of CUDA that rill's kernels use, so the .cu files of ffi/devices/cuda compile as plain C++ (with
 * RILL_CUDA_EMU) and run on the CPU in tests: every block runs alone, its threads as fibers that switch at
 * __syncthreads and at warp shuffles, `__shared__` is static storage (one block at a time), device memory is host
 * memory. It checks the kernels' arithmetic, indexing and barriers against the CPU device; it says nothing about
 * timing, memory coalescing or races the fiber order happens to hide.
 *
 * Streams run their work at once, except while capturing (cudaStreamBeginCapture): then kernel launches (their
 * arguments copied, as a real capture bakes them into the graph) and cudaMemcpyAsync (the pointers, read at replay)
 * are recorded, and cudaGraphLaunch replays them in order. Synchronising a capturing stream, or a synchronous copy,
 * allocation or free while a capture that is not relaxed is under way, fails and invalidates the capture, as the
 * runtime does on a GPU; so a host value baked into a graph, or a host read in the middle of one, fails here too.
 */
#ifndef RILL_CUDA_EMU_RUNTIME_H
#define RILL_CUDA_EMU_RUNTIME_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include <functional>

#define __global__
#define __device__
#define __host__
#define __shared__ static
#define __forceinline__ inline

struct dim3 {
  unsigned x, y, z;
  dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
struct float2 {
  float x, y;
};
struct alignas(16) float4 {
  float x, y, z, w;
};
struct alignas(16) uint4 {
  unsigned x, y, z, w;
};

extern dim3 threadIdx, blockIdx, blockDim, gridDim;

template <typename T> inline T __ldg(const T *p) { return *p; }
/* The fast intrinsics, exact here: the emulation checks indexing and arithmetic, not the device's last ulps. */
inline float __expf(float x) { return expf(x); }
inline float __fdividef(float a, float b) { return a / b; }

/* Barriers: the calling fiber waits until every live thread of its block (or its warp) arrives. */
void __syncthreads();
void __syncwarp(unsigned mask = 0xffffffffu);
void rill_emu_warp_exchange(const void *value, size_t size, int src_lane, void *out);

template <typename V> inline V __shfl_xor_sync(unsigned mask, V v, int lane_mask) {
  (void)mask;
  V out;
  rill_emu_warp_exchange(&v, sizeof v, (int)(threadIdx.x & 31) ^ lane_mask, &out);
  return out;
}

typedef enum cudaError {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorNoDevice = 100,
  cudaErrorInvalidResourceHandle = 400,
  cudaErrorIllegalState = 401,
  cudaErrorNotSupported = 801,
  cudaErrorStreamCaptureUnsupported = 900,
  cudaErrorStreamCaptureInvalidated = 901,
  cudaErrorStreamCaptureUnmatched = 903,
} cudaError_t;
typedef struct CUstream_st *cudaStream_t;
typedef struct CUgraph_st *cudaGraph_t;
typedef struct CUgraphExec_st *cudaGraphExec_t;
/* Values as in CUDA 13's driver_types.h. */
enum cudaStreamCaptureMode {
  cudaStreamCaptureModeGlobal = 0,
  cudaStreamCaptureModeThreadLocal = 1,
  cudaStreamCaptureModeRelaxed = 2
};
enum cudaStreamCaptureStatus {
  cudaStreamCaptureStatusNone = 0,
  cudaStreamCaptureStatusActive = 1,
  cudaStreamCaptureStatusInvalidated = 2
};
enum cudaGraphInstantiateFlags {
  cudaGraphInstantiateFlagAutoFreeOnLaunch = 1,
  cudaGraphInstantiateFlagUpload = 2,
  cudaGraphInstantiateFlagDeviceLaunch = 4,
  cudaGraphInstantiateFlagUseNodePriority = 8
};

/* Runs the kernel body over the grid now, or records it when the stream is capturing (RILL_LAUNCH, kernels.cuh). */
void rill_emu_launch(cudaStream_t s, dim3 grid, dim3 block, const std::function<void()> &body);
/* Test tooling: how many times cudaGraphLaunch has run a graph in this process. */
long rill_emu_graph_launches(void);
enum cudaMemcpyKind { cudaMemcpyHostToDevice = 1, cudaMemcpyDeviceToHost = 2, cudaMemcpyDeviceToDevice = 3 };
#define cudaStreamNonBlocking 1u

struct cudaDeviceProp {
  char name[256];
  int major, minor;
  size_t totalGlobalMem;
  int multiProcessorCount;
};

const char *cudaGetErrorString(cudaError_t e);
cudaError_t cudaGetLastError(void);
cudaError_t cudaGetDeviceCount(int *count);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *prop, int device);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes);
cudaError_t cudaMalloc(void **p, size_t bytes);
template <typename T> inline cudaError_t cudaMalloc(T **p, size_t bytes) {
  return cudaMalloc(reinterpret_cast<void **>(p), bytes);
}
cudaError_t cudaFree(void *p);
cudaError_t cudaMallocHost(void **p, size_t bytes);
template <typename T> inline cudaError_t cudaMallocHost(T **p, size_t bytes) {
  return cudaMallocHost(reinterpret_cast<void **>(p), bytes);
}
cudaError_t cudaFreeHost(void *p);
cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemset(void *dst, int value, size_t bytes);
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind, cudaStream_t s);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t s);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
cudaError_t cudaStreamBeginCapture(cudaStream_t stream, enum cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *pGraph);
cudaError_t cudaStreamIsCapturing(cudaStream_t stream, enum cudaStreamCaptureStatus *pCaptureStatus);
cudaError_t cudaGraphInstantiate(cudaGraphExec_t *pGraphExec, cudaGraph_t graph, unsigned long long flags = 0);
cudaError_t cudaGraphUpload(cudaGraphExec_t graphExec, cudaStream_t stream);
cudaError_t cudaGraphLaunch(cudaGraphExec_t graphExec, cudaStream_t stream);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t graphExec);
cudaError_t cudaGraphDestroy(cudaGraph_t graph);

#endif /* RILL_CUDA_EMU_RUNTIME_H */
