/* Sums and maxima across one thread block (blockDim.x a multiple of 32, at most 1024), every thread gets the result. */
#ifndef RILL_CUDA_BLOCK_REDUCE_CUH
#define RILL_CUDA_BLOCK_REDUCE_CUH

#include <cuda_runtime.h>
#include <math.h>

template <typename V> __device__ inline V rill_warp_sum(V v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ inline float rill_warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

/* scratch: 32 values of shared memory; the call is a barrier for the block. */
template <typename V> __device__ inline V rill_block_sum(V v, V *scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = rill_warp_sum(v);
  __syncthreads(); /* scratch may still be read by a previous reduction */
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : V(0);
  return rill_warp_sum(v);
}

__device__ inline float rill_block_max(float v, float *scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = rill_warp_max(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : -INFINITY;
  return rill_warp_max(v);
}

#endif /* RILL_CUDA_BLOCK_REDUCE_CUH */
