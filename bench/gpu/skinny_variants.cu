/*
 * The CUDA device's weight-streaming kernel (ffi/devices/cuda/kernels_linear.cu, included whole) timed on a GPU in
 * launch variants that keep each output's arithmetic, so every variant must give the library's bits:
 *   as built: what rill_k_linear* launch (rows per warp by N: 4 from N = 4096, else 2; 8 tokens per pass);
 *   2 rows: every N at 2 rows per warp (twice the warps, half the registers of activations' reuse);
 *   4-token passes: the tokens in passes of at most 4 (W read once per pass, half the accumulators).
 * For each Qwen3-8B projection (qkv with the fused RMSNorm, o plain, gate/up with RMSNorm, down with SiLU·mul) and
 * T = 1, 2, 4, 8, 16 tokens it prints µs per call and GB/s of weights, the median of 50 calls rotating over enough
 * weight copies to leave L2, after checking each variant's output bit for bit against the one as built.
 *
 *   nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -I ffi/include -I ffi/src -I ffi/devices \
 *     bench/gpu/skinny_variants.cu -o build/gpu_check/skinny_variants && build/gpu_check/skinny_variants
 *
 * scripts/gpu_check.py builds and runs it as the step "skinny-variants". Exits 1 on a CUDA error or a bit that
 * differs.
 */
#include "cuda/kernels_linear.cu"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CK(call)                                                                                                       \
  do {                                                                                                                 \
    const cudaError_t e_ = (call);                                                                                     \
    if (e_ != cudaSuccess) {                                                                                           \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_));                     \
      std::exit(1);                                                                                                    \
    }                                                                                                                  \
  } while (0)

namespace {

struct shape {
  const char *name;
  prologue p;
  int K, N; /* silu_mul: K is I, x rows are 2I wide */
};

enum class variant { as_built, two_rows, four_token_passes };
const char *variant_name(variant v) {
  return v == variant::as_built ? "as built" : v == variant::two_rows ? "2 rows" : "4-token passes";
}

template <prologue P>
void launch_rows(cudaStream_t s, int R, const float *x, const float *norm_w, int T, int K, const __nv_bfloat16 *W,
                 int N, float *y) {
  const int per_block = kSkinnyWarps * R;
  const dim3 grid((unsigned)((N + per_block - 1) / per_block), (unsigned)((T + kSkinnyTokens - 1) / kSkinnyTokens));
  const int accumulate = P == prologue::silu_mul ? 1 : 0;
  if (R == kSkinnyRowsWide) {
    skinny_kernel<P, kSkinnyRowsWide><<<grid, 32 * kSkinnyWarps, 0, s>>>(x, nullptr, norm_w, 1e-6f, T, K, W, N, nullptr,
                                                                          accumulate, y);
  } else {
    skinny_kernel<P, kSkinnyRowsNarrow><<<grid, 32 * kSkinnyWarps, 0, s>>>(x, nullptr, norm_w, 1e-6f, T, K, W, N,
                                                                            nullptr, accumulate, y);
  }
}

void run(const shape &sh, variant v, cudaStream_t s, const float *x, const float *norm_w, int T,
         const __nv_bfloat16 *W, float *y) {
  const int wide = sh.N >= kSkinnyWideN ? kSkinnyRowsWide : kSkinnyRowsNarrow;
  const int R = v == variant::two_rows ? kSkinnyRowsNarrow : wide;
  const int pass = v == variant::four_token_passes ? 4 : kSkinnyTokens;
  const size_t xw = sh.p == prologue::silu_mul ? 2 * (size_t)sh.K : (size_t)sh.K;
  for (int t0 = 0; t0 < T; t0 += pass) {
    const int n = T - t0 < pass ? T - t0 : pass;
    const float *xt = x + (size_t)t0 * xw;
    float *yt = y + (size_t)t0 * sh.N;
    switch (sh.p) {
    case prologue::plain: launch_rows<prologue::plain>(s, R, xt, norm_w, n, sh.K, W, sh.N, yt); break;
    case prologue::norm: launch_rows<prologue::norm>(s, R, xt, norm_w, n, sh.K, W, sh.N, yt); break;
    case prologue::silu_mul: launch_rows<prologue::silu_mul>(s, R, xt, norm_w, n, sh.K, W, sh.N, yt); break;
    }
  }
  CK(cudaGetLastError());
}

uint32_t next(uint64_t *state) {
  *state = *state * 6364136223846793005ull + 1442695040888963407ull;
  return (uint32_t)(*state >> 33);
}

} // namespace

int main() {
  const shape shapes[] = {{"qkv (norm)", prologue::norm, 4096, 6144},
                          {"o (plain)", prologue::plain, 4096, 4096},
                          {"gate/up (norm)", prologue::norm, 4096, 24576},
                          {"down (silu_mul)", prologue::silu_mul, 12288, 4096}};
  const int Ts[] = {1, 2, 4, 8, 16};
  const variant variants[] = {variant::as_built, variant::two_rows, variant::four_token_passes};
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  int prop_l2 = 0;
  CK(cudaDeviceGetAttribute(&prop_l2, cudaDevAttrL2CacheSize, 0));
  uint64_t rng = 0x9e3779b97f4a7c15ull;
  bool same = true;
  std::printf("%-16s %3s", "projection", "T");
  for (const variant v : variants) std::printf(" | %-28s", variant_name(v));
  std::printf("\n");
  for (const shape &sh : shapes) {
    const size_t wn = (size_t)sh.N * sh.K, wbytes = wn * sizeof(__nv_bfloat16);
    /* Enough copies of W that a call finds none of its weights in L2. */
    const int copies = std::max(2, (int)(4 * (size_t)prop_l2 / wbytes) + 2);
    std::vector<uint16_t> hw(wn);
    for (auto &v : hw) v = (uint16_t)(0x3c00 + (next(&rng) & 0x3ff) - 0x200); /* bf16 around ±0.01 */
    __nv_bfloat16 *W;
    CK(cudaMalloc(&W, wbytes * copies));
    for (int c = 0; c < copies; c++) CK(cudaMemcpy((char *)W + c * wbytes, hw.data(), wbytes, cudaMemcpyHostToDevice));
    const size_t xw = sh.p == prologue::silu_mul ? 2 * (size_t)sh.K : (size_t)sh.K;
    std::vector<float> hx(16 * xw), hn(sh.K);
    for (auto &v : hx) v = (float)((int)(next(&rng) % 2001) - 1000) / 500.0f;
    for (auto &v : hn) v = 1.0f + (float)((int)(next(&rng) % 201) - 100) / 1000.0f;
    float *x, *nw, *y;
    CK(cudaMalloc(&x, hx.size() * sizeof(float)));
    CK(cudaMalloc(&nw, hn.size() * sizeof(float)));
    CK(cudaMalloc(&y, 16 * (size_t)sh.N * sizeof(float)));
    CK(cudaMemcpy(x, hx.data(), hx.size() * sizeof(float), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(nw, hn.data(), hn.size() * sizeof(float), cudaMemcpyHostToDevice));
    for (const int T : Ts) {
      std::vector<float> ref(16 * (size_t)sh.N), got(16 * (size_t)sh.N);
      std::printf("%-16s %3d", sh.name, T);
      for (const variant v : variants) {
        /* Poisoned, then one call: the output's bits (down accumulates into y, so it starts from zeros). */
        CK(cudaMemset(y, sh.p == prologue::silu_mul ? 0 : 0xff, 16 * (size_t)sh.N * sizeof(float)));
        run(sh, v, s, x, nw, T, W, y);
        CK(cudaStreamSynchronize(s));
        CK(cudaMemcpy(got.data(), y, (size_t)T * sh.N * sizeof(float), cudaMemcpyDeviceToHost));
        if (v == variant::as_built) {
          ref = got;
        } else if (std::memcmp(ref.data(), got.data(), (size_t)T * sh.N * sizeof(float)) != 0) {
          same = false;
          std::printf(" | %-28s", "DIFFERENT BITS");
          continue;
        }
        std::vector<float> us;
        for (int rep = 0; rep < 55; rep++) {
          const __nv_bfloat16 *Wc = (const __nv_bfloat16 *)((const char *)W + (rep % copies) * wbytes);
          CK(cudaEventRecord(a, s));
          run(sh, v, s, x, nw, T, Wc, y);
          CK(cudaEventRecord(b, s));
          CK(cudaEventSynchronize(b));
          float ms = 0;
          CK(cudaEventElapsedTime(&ms, a, b));
          if (rep >= 5) us.push_back(ms * 1000.0f);
        }
        std::sort(us.begin(), us.end());
        const float med = us[us.size() / 2];
        char cell[64];
        std::snprintf(cell, sizeof cell, "%8.1f us %6.0f GB/s", med, (double)wbytes / (med * 1e-6) / 1e9);
        std::printf(" | %-28s", cell);
      }
      std::printf("\n");
    }
    CK(cudaFree(W));
    CK(cudaFree(x));
    CK(cudaFree(nw));
    CK(cudaFree(y));
  }
  std::printf(same ? "every variant gave the library's bits\n" : "SOME VARIANT DIFFERS\n");
  return same ? 0 : 1;
}
