/* The CUDA emulation's scheduler and runtime (cuda_runtime.h here). Test tooling: one process, one host thread. */
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>

#include <vector>

#include "cuda_runtime.h"

dim3 threadIdx, blockIdx, blockDim, gridDim;

namespace {

enum class state { runnable, block_barrier, warp_barrier, done };

/* A fiber starts through makecontext/swapcontext and then switches with _setjmp/_longjmp, which skip the signal
 * mask system call swapcontext makes on every switch. */
struct fiber {
  ucontext_t ctx;
  jmp_buf jb;
  bool started;
  state st;
};

constexpr size_t kStackBytes = 128 * 1024;
constexpr size_t kSlotBytes = 16;

struct scheduler {
  ucontext_t home;
  jmp_buf home_jb;
  std::vector<fiber> fibers;
  std::vector<unsigned char *> stacks;
  std::vector<unsigned char> slots; /* warp exchange: kSlotBytes per thread */
  int current = 0;
  const std::function<void()> *body = nullptr;
  cudaError_t error = cudaSuccess;
};

scheduler S;
/* Per thread: warp exchanges made so far in this block. */
std::vector<unsigned> exchange_count;

void set_thread(int i) {
  threadIdx.x = (unsigned)i % blockDim.x;
  threadIdx.y = ((unsigned)i / blockDim.x) % blockDim.y;
  threadIdx.z = (unsigned)i / (blockDim.x * blockDim.y);
}

void fiber_main() {
  (*S.body)();
  S.fibers[(size_t)S.current].st = state::done;
  _longjmp(S.home_jb, 1);
}

void wait(state st) {
  fiber &f = S.fibers[(size_t)S.current];
  const dim3 saved = threadIdx;
  f.st = st;
  if (_setjmp(f.jb) == 0) _longjmp(S.home_jb, 1);
  threadIdx = saved;
}

void resume(int i) {
  fiber &f = S.fibers[(size_t)i];
  S.current = i;
  set_thread(i);
  if (_setjmp(S.home_jb) != 0) return;
  if (!f.started) {
    f.started = true;
    swapcontext(&S.home, &f.ctx);
  } else {
    _longjmp(f.jb, 1);
  }
}

/* Runs one block to completion; false on a deadlock (threads waiting at barriers no one else reaches). */
bool run_block(int n) {
  S.fibers.assign((size_t)n, fiber{});
  while (S.stacks.size() < (size_t)n) S.stacks.push_back(static_cast<unsigned char *>(malloc(kStackBytes)));
  S.slots.assign(2 * (size_t)n * kSlotBytes, 0);
  exchange_count.assign((size_t)n, 0);
  for (int i = 0; i < n; i++) {
    fiber &f = S.fibers[(size_t)i];
    getcontext(&f.ctx);
    f.ctx.uc_stack.ss_sp = S.stacks[(size_t)i];
    f.ctx.uc_stack.ss_size = kStackBytes;
    f.ctx.uc_link = nullptr;
    makecontext(&f.ctx, fiber_main, 0);
    f.st = state::runnable;
    f.started = false;
  }
  for (;;) {
    for (int i = 0; i < n; i++) {
      if (S.fibers[(size_t)i].st == state::runnable) resume(i);
    }
    bool all_done = true, all_at_block = true;
    for (const fiber &f : S.fibers) {
      all_done = all_done && f.st == state::done;
      all_at_block = all_at_block && (f.st == state::done || f.st == state::block_barrier);
    }
    if (all_done) return true;
    bool released = false;
    if (all_at_block) {
      for (fiber &f : S.fibers) {
        if (f.st == state::block_barrier) f.st = state::runnable;
      }
      released = true;
    } else {
      for (int w = 0; w * 32 < n; w++) {
        bool all_at_warp = true, any = false;
        for (int i = w * 32; i < n && i < w * 32 + 32; i++) {
          const state st = S.fibers[(size_t)i].st;
          all_at_warp = all_at_warp && (st == state::done || st == state::warp_barrier);
          any = any || st == state::warp_barrier;
        }
        if (!all_at_warp || !any) continue;
        for (int i = w * 32; i < n && i < w * 32 + 32; i++) {
          if (S.fibers[(size_t)i].st == state::warp_barrier) S.fibers[(size_t)i].st = state::runnable;
        }
        released = true;
      }
    }
    if (!released) return false;
  }
}

} // namespace

void __syncthreads() { wait(state::block_barrier); }

/* Each lane of a warp counts its own exchanges; lanes of a warp exchange in lockstep, so the count's parity picks the
 * bank: a lane writing exchange k + 1 never overwrites a value of exchange k that a slower lane has yet to read. */
void rill_emu_warp_exchange(const void *value, size_t size, int src_lane, void *out) {
  const int me = S.current, warp_base = me - (me & 31);
  const size_t n = S.fibers.size();
  if (exchange_count.size() < n) exchange_count.resize(n);
  const size_t bank = (exchange_count[(size_t)me]++ & 1u) * n;
  memcpy(&S.slots[(bank + (size_t)me) * kSlotBytes], value, size);
  wait(state::warp_barrier);
  memcpy(out, &S.slots[(bank + (size_t)(warp_base + src_lane)) * kSlotBytes], size);
}

void rill_emu_launch(dim3 grid, dim3 block, const std::function<void()> &body) {
  const int n = (int)(block.x * block.y * block.z);
  if (n < 1 || n > 1024 || grid.x * grid.y * grid.z == 0) {
    S.error = cudaErrorInvalidValue;
    return;
  }
  gridDim = grid;
  blockDim = block;
  S.body = &body;
  for (unsigned z = 0; z < grid.z; z++) {
    for (unsigned y = 0; y < grid.y; y++) {
      for (unsigned x = 0; x < grid.x; x++) {
        blockIdx = dim3(x, y, z);
        if (!run_block(n)) {
          S.error = cudaErrorInvalidValue;
          return;
        }
      }
    }
  }
}

const char *cudaGetErrorString(cudaError_t e) {
  switch (e) {
  case cudaSuccess: return "no error";
  case cudaErrorMemoryAllocation: return "out of memory";
  case cudaErrorNoDevice: return "no CUDA-capable device is detected";
  default: return "invalid argument (or a deadlocked emulated block)";
  }
}

cudaError_t cudaGetLastError(void) {
  const cudaError_t e = S.error;
  S.error = cudaSuccess;
  return e;
}

cudaError_t cudaGetDeviceCount(int *count) {
  *count = 1;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp *prop, int device) {
  if (device != 0) return cudaErrorInvalidValue;
  memset(prop, 0, sizeof *prop);
  strcpy(prop->name, "rill CUDA emulator");
  prop->major = 9;
  prop->minor = 0;
  prop->totalGlobalMem = (size_t)1 << 32;
  prop->multiProcessorCount = 132; /* as an H100 */
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) { return device == 0 ? cudaSuccess : cudaErrorInvalidValue; }

cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes) {
  *free_bytes = (size_t)1 << 31;
  *total_bytes = (size_t)1 << 32;
  return cudaSuccess;
}

cudaError_t cudaMalloc(void **p, size_t bytes) {
  *p = malloc(bytes == 0 ? 1 : bytes);
  return *p != nullptr ? cudaSuccess : cudaErrorMemoryAllocation;
}

cudaError_t cudaFree(void *p) {
  free(p);
  return cudaSuccess;
}

cudaError_t cudaMallocHost(void **p, size_t bytes) { return cudaMalloc(p, bytes); }
cudaError_t cudaFreeHost(void *p) { return cudaFree(p); }

cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind) {
  (void)kind;
  if (bytes > 0) memmove(dst, src, bytes);
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind, cudaStream_t s) {
  (void)s;
  return cudaMemcpy(dst, src, bytes, kind);
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags) {
  (void)flags;
  static int token;
  *s = reinterpret_cast<cudaStream_t>(&token);
  return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t s) {
  (void)s;
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t s) {
  (void)s;
  return cudaSuccess;
}
