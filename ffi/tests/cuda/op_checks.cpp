/*
 * Each operation of the device interface (ffi/src/device_ops.h) on the CUDA device against the same operation on the
 * CPU device, from the same inputs. Both engines hold the same bf16 checkpoint and a bf16 KV cache. The CPU engine runs
 * a step with its operations wrapped so that each records the step buffers it leaves (x, qkv, attn, gu, the MoE's
 * normed input and router logits); the CUDA engine then runs the same step with wrappers that, before each operation,
 * load the CPU device's buffers as they stood after the previous one, and after it compare what the operation wrote.
 * So every operation starts from the CPU's inputs (the KV cache each device's rope_kv wrote from those inputs), and
 * a difference is that operation's own, not carried from earlier layers.
 *
 * Errors are relative to the largest value the operation produced (for operations that add into x: the largest change
 * they made), per operation kind, on the GEMV path (T ≤ kGemvMaxTokens: fp32 activations, the devices differ in
 * summation order) and above it (the CUDA device rounds GEMM inputs to bf16). A wrong index, head or expert is O(1).
 * Fixtures: dense llama3, qwen2 (q/k/v bias), qwen3 (q/k norms), gpt-oss (MoE, sinks, a sliding window shorter than
 * the prefill).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "../batch_fixture.h"
#include "../check.h"
#include "cuda/kernels.cuh"
#include "cuda_runtime.h"
#include "op_checks.h"
extern "C" {
#include "engine.h"
}

namespace {

enum op_kind { OP_EMBED, OP_TAP, OP_QKV, OP_ROPE_KV, OP_ATTEND, OP_ATTN_OUT, OP_GATE_UP, OP_DOWN, OP_ROUTER,
               OP_EXPERTS, OP_KINDS };
const char *const kOpNames[OP_KINDS] = {"embed", "tap",  "qkv",    "rope_kv", "attend",
                                        "attn_out", "gate_up", "down", "router", "experts"};

enum buffer { B_X, B_QKV, B_ATTN, B_GU, B_XN, B_LOGITS, B_COUNT };

/* Largest relative error seen per operation kind: [0] GEMV path, [1] bf16 GEMM inputs. On the GEMV path the devices
 * differ in fp32 summation order (measured up to 4.4e-7; a K or V entry whose bf16 rounding flips would add a few
 * times 1e-4 to attend); above it every GEMM input is rounded to bf16 once (unit roundoff 2^-8 = 3.9e-3 per element,
 * measured up to 3.0e-3 of the largest output). */
double worst[OP_KINDS][2];
constexpr double kOpBound[2] = {1e-3, 1e-2};

struct snapshot {
  int op = 0, layer = 0;
  std::vector<float> buf[B_COUNT];
};

struct op_run {
  rill_engine *cpu = nullptr;
  rill_cuda *cuda = nullptr;
  const rill_device_ops *cpu_real = nullptr, *cuda_real = nullptr;
  std::vector<snapshot> log; /* the CPU device's buffers after each operation of the step */
  size_t next = 0;           /* the CUDA device's position in log */
  int T = 0;
  bool failed = false;
  const char *dir = "", *what = "";
} run;

int width(buffer b) {
  const rill_model_config *c = &run.cpu->cfg;
  switch (b) {
  case B_X: return c->hidden_size;
  case B_QKV: return run.cpu->qkv_dim;
  case B_ATTN: return c->num_heads * c->head_dim;
  case B_GU: return c->num_experts > 0 ? 0 : 2 * c->intermediate_size;
  case B_XN: return c->num_experts > 0 ? c->hidden_size : 0;
  case B_LOGITS: return c->num_experts;
  case B_COUNT: break;
  }
  return 0;
}

float *cpu_buffer(buffer b) {
  rill_engine *e = run.cpu;
  switch (b) {
  case B_X: return e->x;
  case B_QKV: return e->qkv;
  case B_ATTN: return e->attn;
  case B_GU: return e->gu;
  case B_XN: return e->xn;
  case B_LOGITS: return e->moe.logits;
  case B_COUNT: break;
  }
  return nullptr;
}

float *cuda_buffer(buffer b) {
  const rill_cuda_buffers d = rill_cuda_step_buffers(run.cuda);
  switch (b) {
  case B_X: return d.x;
  case B_QKV: return d.qkv;
  case B_ATTN: return d.attn;
  case B_GU: return d.gu;
  case B_XN: return d.moe_xn;
  case B_LOGITS: return d.moe_logits;
  case B_COUNT: break;
  }
  return nullptr;
}

const rill_layer_op *op_slot(const rill_device_ops *ops, int k) {
  const rill_layer_op *slots[OP_KINDS] = {&ops->embed,    &ops->tap,     &ops->qkv,  &ops->rope_kv, &ops->attend,
                                          &ops->attn_out, &ops->gate_up, &ops->down, &ops->router,  &ops->experts};
  return slots[k];
}

/* The CPU device's q/k/v bias is added by its rope_kv; the CUDA device's by its qkv projection. */
void add_qkv_bias(int layer, std::vector<float> *qkv) {
  const float *bias = run.cpu->w.layers[layer].qkv_bias;
  if (bias == nullptr) return;
  const int w = run.cpu->qkv_dim;
  for (int t = 0; t < run.T; t++) {
    for (int i = 0; i < w; i++) (*qkv)[(size_t)t * w + i] += bias[i];
  }
}

template <int K> rill_status cpu_wrap(void *dev, int32_t layer, int32_t T, char *err, size_t err_cap) {
  const rill_status s = (*op_slot(run.cpu_real, K))(dev, layer, T, err, err_cap);
  snapshot snap;
  snap.op = K;
  snap.layer = layer;
  for (int b = 0; b < B_COUNT; b++) {
    const size_t n = (size_t)T * (size_t)width(buffer(b));
    const float *src = cpu_buffer(buffer(b));
    snap.buf[b].assign(src, src + n);
  }
  run.log.push_back(snap);
  return s;
}

/* max |got − want| over the rows (cols of each row from col0), relative to the largest |want − base| (base NULL: 0). */
double rel_error(const float *got, const float *want, const float *base, int T, int stride, int col0, int cols) {
  double diff = 0.0, scale = 1e-20;
  for (int t = 0; t < T; t++) {
    for (int i = col0; i < col0 + cols; i++) {
      const size_t j = (size_t)t * stride + i;
      diff = fmax(diff, fabs((double)got[j] - (double)want[j]));
      scale = fmax(scale, fabs((double)want[j] - (base != nullptr ? (double)base[j] : 0.0)));
    }
  }
  return diff / scale;
}

void compare_op(int k, int layer, const snapshot &before, const snapshot &after) {
  const rill_model_config *c = &run.cpu->cfg;
  const int T = run.T, path = T > kGemvMaxTokens;
  double d = 0.0;
  switch (k) {
  case OP_EMBED:
  case OP_ATTN_OUT:
  case OP_DOWN:
  case OP_EXPERTS: {
    const float *base = k == OP_EMBED ? nullptr : before.buf[B_X].data();
    d = rel_error(cuda_buffer(B_X), after.buf[B_X].data(), base, T, c->hidden_size, 0, c->hidden_size);
    break;
  }
  case OP_QKV: {
    std::vector<float> want = after.buf[B_QKV];
    add_qkv_bias(layer, &want);
    d = rel_error(cuda_buffer(B_QKV), want.data(), nullptr, T, run.cpu->qkv_dim, 0, run.cpu->qkv_dim);
    break;
  }
  case OP_ROPE_KV: /* q, normed and rotated in place; k and v went to the cache, which attend reads */
    d = rel_error(cuda_buffer(B_QKV), after.buf[B_QKV].data(), nullptr, T, run.cpu->qkv_dim, 0,
                  c->num_heads * c->head_dim);
    break;
  case OP_ATTEND: {
    const int w = c->num_heads * c->head_dim;
    d = rel_error(cuda_buffer(B_ATTN), after.buf[B_ATTN].data(), nullptr, T, w, 0, w);
    break;
  }
  case OP_GATE_UP: {
    const int w = 2 * c->intermediate_size;
    d = rel_error(cuda_buffer(B_GU), after.buf[B_GU].data(), nullptr, T, w, 0, w);
    break;
  }
  case OP_ROUTER:
    d = fmax(rel_error(cuda_buffer(B_XN), after.buf[B_XN].data(), nullptr, T, c->hidden_size, 0, c->hidden_size),
             rel_error(cuda_buffer(B_LOGITS), after.buf[B_LOGITS].data(), nullptr, T, c->num_experts, 0,
                       c->num_experts));
    break;
  case OP_TAP:
    return;
  }
  worst[k][path] = fmax(worst[k][path], d);
  CHECK_MSG(d <= kOpBound[path], "%s %s: layer %d %s differs from the cpu device by %.3g (bound %.3g)", run.dir,
            run.what, layer, kOpNames[k], d, kOpBound[path]);
}

template <int K> rill_status cuda_wrap(void *dev, int32_t layer, int32_t T, char *err, size_t err_cap) {
  if (run.next >= run.log.size() || run.log[run.next].op != K || run.log[run.next].layer != layer) {
    CHECK_MSG(false, "%s %s: the cuda device ran %s of layer %d where the cpu device ran something else", run.dir,
              run.what, kOpNames[K], layer);
    run.failed = true;
    return (*op_slot(run.cuda_real, K))(dev, layer, T, err, err_cap);
  }
  /* The CPU device's buffers as they stood before this operation (embed: nothing to load). */
  if (run.next > 0) {
    const snapshot &prev = run.log[run.next - 1];
    for (int b = 0; b < B_COUNT; b++) {
      float *dst = cuda_buffer(buffer(b));
      if (dst == nullptr || prev.buf[b].empty()) continue;
      if (b == B_QKV && prev.op == OP_QKV) {
        std::vector<float> with_bias = prev.buf[b];
        add_qkv_bias(prev.layer, &with_bias);
        memcpy(dst, with_bias.data(), with_bias.size() * sizeof(float));
      } else {
        memcpy(dst, prev.buf[b].data(), prev.buf[b].size() * sizeof(float));
      }
    }
  }
  const rill_status s = (*op_slot(run.cuda_real, K))(dev, layer, T, err, err_cap);
  if (s == RILL_OK) {
    static const snapshot none;
    compare_op(K, layer, run.next > 0 ? run.log[run.next - 1] : none, run.log[run.next]);
  }
  run.next++;
  return s;
}

const rill_device_ops kCpuWrapped = {cpu_wrap<0>, cpu_wrap<1>, cpu_wrap<2>, cpu_wrap<3>, cpu_wrap<4>,
                                     cpu_wrap<5>, cpu_wrap<6>, cpu_wrap<7>, cpu_wrap<8>, cpu_wrap<9>};
const rill_device_ops kCudaWrapped = {cuda_wrap<0>, cuda_wrap<1>, cuda_wrap<2>, cuda_wrap<3>, cuda_wrap<4>,
                                      cuda_wrap<5>, cuda_wrap<6>, cuda_wrap<7>, cuda_wrap<8>, cuda_wrap<9>};

int32_t token_for(int32_t seq, int32_t pos, int32_t vocab) {
  uint32_t h = (uint32_t)seq * 2246822519u ^ (uint32_t)pos * 3266489917u;
  h ^= h >> 15;
  h *= 0x85ebca6bu;
  return (int32_t)((h ^ (h >> 13)) % (uint32_t)vocab);
}

/* One step on both devices, operation by operation. */
void step(rill_engine *cpu, rill_engine *cuda, fixture *f, const char *dir, const char *what) {
  for (int s = 0; s < f->num_seqs; s++) {
    for (int t = f->query_start[s]; t < f->query_start[s + 1]; t++) {
      f->tokens[t] = token_for(s, f->positions[t], cpu->cfg.vocab_size);
    }
  }
  rill_step_batch b = fixture_batch(f);
  std::vector<float> logits((size_t)b.num_tokens * (size_t)cpu->cfg.vocab_size);
  run.log.clear();
  run.next = 0;
  run.T = b.num_tokens;
  run.dir = dir;
  run.what = what;
  cpu->ops = &kCpuWrapped;
  rill_status s1 = rill_forward_logits(cpu, &b, logits.data());
  cpu->ops = run.cpu_real;
  rill_cuda_set_ops(cuda->cuda, &kCudaWrapped);
  rill_status s2 = rill_forward_logits(cuda, &b, logits.data());
  rill_cuda_set_ops(cuda->cuda, nullptr);
  CHECK_MSG(s1 == RILL_OK && s2 == RILL_OK, "%s %s: %s / %s", dir, what, rill_last_error(cpu),
            rill_last_error(cuda));
  CHECK_MSG(run.next == run.log.size(), "%s %s: the cuda device ran %zu operations, the cpu device %zu", dir, what,
            run.next, run.log.size());
}

void fixture_checks(const char *dir) {
  rill_options o;
  memset(&o, 0, sizeof o);
  o.threads = 1;
  o.num_blocks = FX_MAX_SEQS * FX_STRIDE;
  o.num_sliding_blocks = o.num_blocks;
  o.max_batch_tokens = FX_MAX_TOKENS;
  o.max_seqs = 4;
  o.max_drafts = 3;
  o.dtype = "bf16";
  o.kv_dtype = "bf16";
  o.device = "cpu";
  rill_engine *cpu = nullptr, *cuda = nullptr;
  CHECK_MSG(rill_engine_create(dir, &o, &cpu) == RILL_OK, "cpu %s: %s", dir, rill_global_error());
  o.device = "cuda";
  CHECK_MSG(rill_engine_create(dir, &o, &cuda) == RILL_OK, "cuda %s: %s", dir, rill_global_error());
  if (cpu != nullptr && cuda != nullptr) {
    run.cpu = cpu;
    run.cuda = cuda->cuda;
    run.cpu_real = cpu->ops;
    run.cuda_real = rill_cuda_ops(cuda->cuda);
    /* A prefill above the GEMV threshold (sequence 0 longer than gpt-oss's window of 20), a chunk of 12 on the GEMV
     * path with several tokens (the grouped experts), a decode of three, and one token alone (the per-pair experts). */
    fixture pre;
    const int32_t pfed[3] = {30, 5, 2}, pctx[3] = {30, 5, 2};
    fixture_init(&pre, 3, pfed, pctx);
    step(cpu, cuda, &pre, dir, "prefill 37");
    fixture chunk;
    const int32_t cfed[2] = {10, 2}, cctx[2] = {40, 7};
    fixture_init(&chunk, 2, cfed, cctx);
    step(cpu, cuda, &chunk, dir, "chunk 12");
    fixture dec;
    const int32_t dfed[3] = {1, 1, 1}, dctx[3] = {41, 8, 3};
    fixture_init(&dec, 3, dfed, dctx);
    step(cpu, cuda, &dec, dir, "decode 3");
    fixture one;
    const int32_t ofed[1] = {1}, octx[1] = {42};
    fixture_init(&one, 1, ofed, octx);
    step(cpu, cuda, &one, dir, "decode 1");
  }
  rill_engine_destroy(cpu);
  rill_engine_destroy(cuda);
}

} // namespace

void device_op_checks(int *passed, int *failed) {
  /* Graphs captured at create would replay the device's own operations, not the wrappers. */
  setenv("RILL_CUDA_GRAPHS", "0", 1);
  const char *dirs[] = {"tests/fixtures/checkpoints/llama3-bf16", "tests/fixtures/checkpoints/qwen2-bf16",
                        "tests/fixtures/checkpoints/qwen3-bf16", "tests/fixtures/checkpoints/gptoss-bf16"};
  for (const char *dir : dirs) fixture_checks(dir);
  unsetenv("RILL_CUDA_GRAPHS");
  for (int k = 0; k < OP_KINDS; k++) {
    if (k == OP_TAP) continue;
    printf("device op %-8s: cuda within %.3g of the cpu device on the GEMV path, %.3g with bf16 GEMM inputs\n",
           kOpNames[k], worst[k][0], worst[k][1]);
  }
  *passed = check_passed_count;
  *failed = check_failed_count;
}
