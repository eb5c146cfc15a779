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
void __syncwarp(unsigned mask) {
  (void)mask;
  wait(state::warp_barrier);
}

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

/* A stream's recorded work while it captures, and a graph's (or an executable graph's) work: launches with their
 * arguments copied by the lambda, copies as pointers read when they run. */
struct emu_op {
  dim3 grid, block;
  std::function<void()> body; /* empty: a copy */
  void *dst;
  const void *src;
  size_t bytes;
};

struct CUstream_st {
  bool capturing, invalidated;
  cudaStreamCaptureMode mode;
  std::vector<emu_op> ops;
};
struct CUgraph_st {
  std::vector<emu_op> ops;
};
struct CUgraphExec_st {
  std::vector<emu_op> ops;
};

namespace {

/* Captures under way that forbid unsafe calls (modes other than relaxed); one host thread, so thread-local and global
 * mode forbid the same calls. */
std::vector<cudaStream_t> strict_captures;
long graph_launches = 0;

cudaError_t run_grid(dim3 grid, dim3 block, const std::function<void()> &body) {
  const int n = (int)(block.x * block.y * block.z);
  gridDim = grid;
  blockDim = block;
  S.body = &body;
  for (unsigned z = 0; z < grid.z; z++) {
    for (unsigned y = 0; y < grid.y; y++) {
      for (unsigned x = 0; x < grid.x; x++) {
        blockIdx = dim3(x, y, z);
        if (!run_block(n)) return cudaErrorInvalidValue;
      }
    }
  }
  return cudaSuccess;
}

cudaError_t run_ops(const std::vector<emu_op> &ops) {
  for (const emu_op &op : ops) {
    if (op.body) {
      const cudaError_t e = run_grid(op.grid, op.block, op.body);
      if (e != cudaSuccess) return e;
    } else if (op.bytes > 0) {
      memmove(op.dst, op.src, op.bytes);
    }
  }
  return cudaSuccess;
}

/* A call that may synchronise or allocate: refused, and the strict captures invalidated, while one is under way. */
cudaError_t unsafe_call() {
  for (cudaStream_t s : strict_captures) s->invalidated = true;
  return strict_captures.empty() ? cudaSuccess : cudaErrorStreamCaptureUnsupported;
}

void end_strict(cudaStream_t s) {
  for (size_t i = 0; i < strict_captures.size(); i++) {
    if (strict_captures[i] == s) {
      strict_captures.erase(strict_captures.begin() + (long)i);
      return;
    }
  }
}

void invalidate(cudaStream_t s) {
  if (s != nullptr && s->capturing) s->invalidated = true;
}

} // namespace

void rill_emu_launch(cudaStream_t s, dim3 grid, dim3 block, const std::function<void()> &body) {
  const int n = (int)(block.x * block.y * block.z);
  if (n < 1 || n > 1024 || grid.x * grid.y * grid.z == 0) {
    S.error = cudaErrorInvalidValue;
    invalidate(s);
    return;
  }
  if (s != nullptr && s->capturing) {
    if (!s->invalidated) s->ops.push_back(emu_op{grid, block, body, nullptr, nullptr, 0});
    return;
  }
  const cudaError_t e = run_grid(grid, block, body);
  if (e != cudaSuccess) S.error = e;
}

long rill_emu_graph_launches(void) { return graph_launches; }

const char *cudaGetErrorString(cudaError_t e) {
  switch (e) {
  case cudaSuccess: return "no error";
  case cudaErrorMemoryAllocation: return "out of memory";
  case cudaErrorNoDevice: return "no CUDA-capable device is detected";
  case cudaErrorInvalidResourceHandle: return "invalid resource handle";
  case cudaErrorIllegalState: return "the operation cannot be performed in the present state";
  case cudaErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
  case cudaErrorStreamCaptureInvalidated: return "operation failed due to a previous error during capture";
  case cudaErrorStreamCaptureUnmatched: return "the capture was not initiated in this stream";
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
  *p = nullptr;
  if (const cudaError_t e = unsafe_call(); e != cudaSuccess) return e;
  *p = malloc(bytes == 0 ? 1 : bytes);
  return *p != nullptr ? cudaSuccess : cudaErrorMemoryAllocation;
}

cudaError_t cudaFree(void *p) {
  if (const cudaError_t e = unsafe_call(); e != cudaSuccess) return e;
  free(p);
  return cudaSuccess;
}

cudaError_t cudaMallocHost(void **p, size_t bytes) { return cudaMalloc(p, bytes); }
cudaError_t cudaFreeHost(void *p) { return cudaFree(p); }

cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind) {
  (void)kind;
  if (const cudaError_t e = unsafe_call(); e != cudaSuccess) return e;
  if (bytes > 0) memmove(dst, src, bytes);
  return cudaSuccess;
}

cudaError_t cudaMemset(void *dst, int value, size_t bytes) {
  if (const cudaError_t e = unsafe_call(); e != cudaSuccess) return e;
  if (bytes > 0) memset(dst, value, bytes);
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind, cudaStream_t s) {
  (void)kind;
  if (s != nullptr && s->capturing) {
    if (!s->invalidated) s->ops.push_back(emu_op{dim3(), dim3(), {}, dst, src, bytes});
    return cudaSuccess;
  }
  if (bytes > 0) memmove(dst, src, bytes);
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags) {
  (void)flags;
  *s = new CUstream_st{false, false, cudaStreamCaptureModeGlobal, {}};
  return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t s) {
  if (s == nullptr) return cudaErrorInvalidResourceHandle;
  end_strict(s);
  delete s;
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t s) {
  if (s != nullptr && s->capturing) {
    s->invalidated = true;
    return cudaErrorStreamCaptureUnsupported;
  }
  return unsafe_call();
}

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, enum cudaStreamCaptureMode mode) {
  if (stream == nullptr) return cudaErrorStreamCaptureUnsupported; /* the legacy stream cannot capture */
  if (stream->capturing) return cudaErrorIllegalState;
  if ((int)mode < 0 || (int)mode > 2) return cudaErrorInvalidValue;
  *stream = CUstream_st{true, false, mode, {}};
  if (mode != cudaStreamCaptureModeRelaxed) strict_captures.push_back(stream);
  return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *pGraph) {
  *pGraph = nullptr;
  if (stream == nullptr || !stream->capturing) return cudaErrorIllegalState;
  end_strict(stream);
  const bool invalidated = stream->invalidated;
  std::vector<emu_op> ops;
  ops.swap(stream->ops);
  *stream = CUstream_st{false, false, cudaStreamCaptureModeGlobal, {}};
  if (invalidated) return cudaErrorStreamCaptureInvalidated;
  *pGraph = new CUgraph_st{std::move(ops)};
  return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, enum cudaStreamCaptureStatus *pCaptureStatus) {
  *pCaptureStatus = stream == nullptr || !stream->capturing ? cudaStreamCaptureStatusNone
                    : stream->invalidated                   ? cudaStreamCaptureStatusInvalidated
                                                            : cudaStreamCaptureStatusActive;
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t *pGraphExec, cudaGraph_t graph, unsigned long long flags) {
  *pGraphExec = nullptr;
  if (graph == nullptr) return cudaErrorInvalidValue;
  if (flags & ~(unsigned long long)15) return cudaErrorInvalidValue;
  *pGraphExec = new CUgraphExec_st{graph->ops};
  return cudaSuccess;
}

/* Device memory is host memory: nothing to upload. */
cudaError_t cudaGraphUpload(cudaGraphExec_t graphExec, cudaStream_t stream) {
  if (graphExec == nullptr) return cudaErrorInvalidResourceHandle;
  if (stream != nullptr && stream->capturing) {
    stream->invalidated = true;
    return cudaErrorStreamCaptureUnsupported;
  }
  return cudaSuccess;
}

/* Into a capturing stream the graph's work is recorded (a child graph on a GPU); otherwise it runs now. */
cudaError_t cudaGraphLaunch(cudaGraphExec_t graphExec, cudaStream_t stream) {
  if (graphExec == nullptr) return cudaErrorInvalidResourceHandle;
  if (stream != nullptr && stream->capturing) {
    if (!stream->invalidated) stream->ops.insert(stream->ops.end(), graphExec->ops.begin(), graphExec->ops.end());
    return cudaSuccess;
  }
  graph_launches++;
  return run_ops(graphExec->ops);
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t graphExec) {
  if (graphExec == nullptr) return cudaErrorInvalidResourceHandle;
  delete graphExec;
  return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  if (graph == nullptr) return cudaErrorInvalidResourceHandle;
  delete graph;
  return cudaSuccess;
}
