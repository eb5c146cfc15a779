/* Causal attention of fed tokens over the paged KV cache (kernels.cuh).
 *
 * Work unit: a tile of consecutive fed tokens of one sequence × one KV head; its rows are (token, query head of the
 * group) pairs, so each K/V row a block stages in shared memory serves every query head of the KV head and every
 * token of the tile. A token's positions are cut into granules of g.granule positions at fixed multiples (a function
 * of the position alone); within a granule an online softmax runs over chunks of kChunk positions, and the granules
 * are combined in ascending order by merge_into. Two kernels share that arithmetic:
 *  - split (steps of at most kSplitMaxTokens tokens: decode and draft verification): one block per (tile, KV head,
 *    granule) writes each row's partial (max, sum, weighted values); merge_kernel combines a token's granules;
 *  - prefill (larger steps, chunked prefill after cached prefix blocks): one block per (tile, KV head) walks the
 *    granules in order and combines them in registers.
 * Every per-row operation is the same in both and independent of the other rows of the block (a position past a
 * row's own is masked and leaves its state bit for bit unchanged), so a token's output is bitwise the same whatever
 * else is in the step, and whichever kernel serves it.
 *
 * Everything per step comes from device memory (positions, query_start); the launch shapes depend only on the upper
 * bounds T and num_seqs, and blocks past the step's work exit at once.
 *
 * Sliding windows mask a row's positions before last − window + 1 like those past its own, and granules wholly before
 * every row's window are skipped (a granule the row sees nothing of leaves its state unchanged, so skipping it keeps
 * the bits). Sinks join at the very end (sink_final), the same arithmetic in both kernels.
 */
#include "block_reduce.cuh"
#include "kernels.cuh"

namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kChunk = 32;        /* positions per chunk: one warp lane each */
constexpr int kMaxHeadDim = 256;
constexpr int kRowElems = 4096; /* rows × head_dim of a block: its q in shared memory, accumulators in registers */
constexpr int kPerThread = kRowElems / kThreads;
constexpr int kMaxRows = 64;
constexpr int kKvStride = kMaxHeadDim + 2; /* padded row of the K/V tile: lanes reading different rows hit different
                                              banks ((D + 2) / 2 words apart, odd for D ≡ 0 mod 4) */
constexpr int kMinGranule = 128;

/* A product the compiler may not fuse into a following add: both kernels must round a score the same way. */
__device__ inline float mul_rn(float a, float b) {
#ifdef RILL_CUDA_EMU
  return a * b; /* g++ in ISO C++ mode contracts nothing */
#else
  return __fmul_rn(a, b);
#endif
}
constexpr int kMaxGranules = 64;

/* Tokens per tile: as many as fit kRowElems and kMaxRows with all of the group's query heads, at most 16. */
__host__ __device__ inline int tile_tokens(int G, int D) {
  int rows = kRowElems / D;
  if (rows > kMaxRows) rows = kMaxRows;
  int t = rows / G;
  return t < 1 ? 1 : t > kSplitMaxTokens ? kSplitMaxTokens : t;
}

struct tile_work {
  int seq, t0, nt; /* tokens [t0, t0 + nt) of sequence seq; nt 0: no work for this block */
};

/* Tile x of the step, numbering each sequence's ceil(tokens / tpt) tiles in batch order: a block-wide scan of
 * query_start (every thread returns the same answer; the call is a barrier). */
__device__ tile_work find_tile(const int32_t *query_start, int num_seqs, int tpt, int x) {
  __shared__ int counts[kThreads];
  __shared__ tile_work found;
  if (threadIdx.x == 0) found = tile_work{0, 0, 0};
  int carry = 0;
  for (int base = 0; base < num_seqs; base += kThreads) {
    const int s = base + (int)threadIdx.x;
    const int q0 = s < num_seqs ? query_start[s] : 0, q1 = s < num_seqs ? query_start[s + 1] : 0;
    const int mine = (q1 - q0 + tpt - 1) / tpt;
    __syncthreads();
    counts[threadIdx.x] = mine;
    __syncthreads();
    for (int o = 1; o < kThreads; o <<= 1) { /* inclusive Hillis–Steele scan */
      const int add = (int)threadIdx.x >= o ? counts[threadIdx.x - o] : 0;
      __syncthreads();
      counts[threadIdx.x] += add;
      __syncthreads();
    }
    const int hi = carry + counts[threadIdx.x], lo = hi - mine;
    if (mine > 0 && x >= lo && x < hi) {
      const int t0 = q0 + (x - lo) * tpt;
      found = tile_work{s, t0, q1 - t0 < tpt ? q1 - t0 : tpt};
    }
    carry += counts[kThreads - 1];
  }
  __syncthreads();
  return found;
}

/* A row's running state over one granule. */
struct row_state {
  float m, l;
};

/* Combines granule partial (mg, lg, accg) into the running (M, L, A), granules in ascending order. A partial with
 * mg = −∞ (no position of the row in the granule) leaves the state unchanged bit for bit. */
__device__ inline void merge_scales(float M, float mg, float *a, float *b, float *m_new) {
  *m_new = fmaxf(M, mg);
  if (*m_new == -INFINITY) {
    *a = 1.0f;
    *b = 0.0f;
    return;
  }
  *a = expf(M - *m_new); /* 0 while M = −∞ */
  *b = expf(mg - *m_new);
}

struct block_state {
  float q[kRowElems];
  __nv_bfloat16 kv[kChunk * kKvStride]; /* K of the chunk, then V */
  float p[kMaxRows][kChunk];
  row_state r[kMaxRows];
  float corr[kMaxRows];
  int last[kMaxRows];  /* the row's token's position: it sees positions ≤ last */
  int first[kMaxRows]; /* and ≥ first (0 without a sliding window) */
};

/* The window's first position for a token at `last`. */
__device__ inline int window_first(int last, int window) {
  return window > 0 && last - window + 1 > 0 ? last - window + 1 : 0;
}

/* A row's final (M, L) with the sink logit S as one more softmax column: the weighted sum is scaled by *a and divided
 * by *lf. */
__device__ inline void sink_final(float M, float L, float S, float *a, float *lf) {
  const float mf = fmaxf(M, S);
  *a = expf(M - mf);
  *lf = fmaf(L, *a, expf(S - mf));
}

/* Stages positions [c0, c0 + cnt) of the sequence's K or V rows of (layer, kh) in s.kv. */
__device__ inline void stage(block_state &s, const __nv_bfloat16 *cache, const int32_t *table, const rill_kv_geom &g,
                             int layer, int kh, int c0, int cnt) {
  const int D = g.head_dim;
  const size_t head_stride = (size_t)g.block_size * D;
  if (D % 8 == 0) { /* 16-byte loads */
    const int per = D / 8;
    for (int i = threadIdx.x; i < cnt * per; i += kThreads) {
      const int j = i / per, c = i % per, pos = c0 + j;
      const size_t at = (((size_t)layer * g.num_blocks + table[pos / g.block_size]) * g.kv_heads + kh) * head_stride +
                        (size_t)(pos % g.block_size) * D + (size_t)c * 8;
      const uint4 v = *reinterpret_cast<const uint4 *>(cache + at);
      uint32_t *dst = reinterpret_cast<uint32_t *>(s.kv + j * kKvStride + c * 8);
      dst[0] = v.x;
      dst[1] = v.y;
      dst[2] = v.z;
      dst[3] = v.w;
    }
  } else { /* even D: 4-byte loads */
    const int per = D / 2;
    for (int i = threadIdx.x; i < cnt * per; i += kThreads) {
      const int j = i / per, c = i % per, pos = c0 + j;
      const size_t at = (((size_t)layer * g.num_blocks + table[pos / g.block_size]) * g.kv_heads + kh) * head_stride +
                        (size_t)(pos % g.block_size) * D + (size_t)c * 2;
      *reinterpret_cast<uint32_t *>(s.kv + j * kKvStride + c * 2) = *reinterpret_cast<const uint32_t *>(cache + at);
    }
  }
}

/* One granule [gb, ge) of the tile's rows: acc and s.r hold the granule's partial afterwards (from m = −∞, l = 0,
 * acc = 0). `hi`: one past the largest position any row sees; chunks start at multiples of kChunk from gb. */
__device__ inline void run_granule(block_state &s, float (&acc)[kPerThread], int rows, int D, float scale,
                                   const __nv_bfloat16 *kc, const __nv_bfloat16 *vc, const int32_t *table,
                                   const rill_kv_geom &g, int layer, int kh, int gb, int ge, int hi) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int end = ge < hi ? ge : hi;
#pragma unroll
  for (int k = 0; k < kPerThread; k++) acc[k] = 0.0f;
  __syncthreads(); /* the previous granule's readers of s.r are done */
  if ((int)threadIdx.x < rows) s.r[threadIdx.x] = row_state{-INFINITY, 0.0f};
  for (int c0 = gb; c0 < end; c0 += kChunk) {
    const int cnt = end - c0 < kChunk ? end - c0 : kChunk;
    __syncthreads(); /* s.kv (V of the previous chunk) and s.p are no longer read */
    stage(s, kc, table, g, layer, kh, c0, cnt);
    __syncthreads();
    /* One warp per row: lane j scores position c0 + j; positions past the row's own are masked. */
    for (int r = warp; r < rows; r += kWarps) {
      const int pos = c0 + lane;
      const bool valid = lane < cnt && pos <= s.last[r] && pos >= s.first[r];
      float score = -INFINITY;
      if (valid) {
        const float *q = s.q + r * D;
        const __nv_bfloat16 *k = s.kv + lane * kKvStride;
        float dot = 0.0f;
        for (int d = 0; d < D; d += 2) {
          const float2 kk = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(k + d));
          dot = fmaf(q[d], kk.x, dot);
          dot = fmaf(q[d + 1], kk.y, dot);
        }
        score = mul_rn(dot, scale);
      }
      const float m_old = s.r[r].m;
      const float m_new = fmaxf(m_old, rill_warp_max(score));
      /* m_new = −∞: no position of the row so far; the state stays as it is. */
      const float e = valid ? expf(score - m_new) : 0.0f;
      const float sum = rill_warp_sum(e);
      s.p[r][lane] = e;
      /* Every lane has read s.r[r] above before lane 0 rewrites it: the shuffles order execution, not shared memory
       * (compute-sanitizer's racecheck reports the write-after-read hazard without this). */
      __syncwarp();
      if (lane == 0) {
        const float c = m_new == -INFINITY ? 1.0f : expf(m_old - m_new); /* 0 on a row's first scored chunk */
        s.corr[r] = c;
        s.r[r].l = fmaf(s.r[r].l, c, sum);
        s.r[r].m = m_new;
      }
    }
    __syncthreads(); /* K is no longer read; s.p and s.corr are published */
    stage(s, vc, table, g, layer, kh, c0, cnt);
    __syncthreads();
#pragma unroll
    for (int k = 0; k < kPerThread; k++) {
      const int i = threadIdx.x + k * kThreads;
      if (i < rows * D) {
        const int r = i / D, d = i % D;
        float a = acc[k] * s.corr[r];
        /* Zero weights (masked or underflowed) are skipped, so masked positions are never read. */
        for (int j = 0; j < cnt; j++) {
          const float pj = s.p[r][j];
          if (pj != 0.0f) a = fmaf(pj, __bfloat162float(s.kv[j * kKvStride + d]), a);
        }
        acc[k] = a;
      }
    }
  }
  __syncthreads(); /* s.r is final for the granule */
}

/* Loads the tile's q rows (row = token-major, then the group's query heads) and each row's last position. */
__device__ inline void load_rows(block_state &s, const float *qkv, int num_heads, const rill_kv_geom &g, int kh,
                                 const int32_t *positions, tile_work w, int G, int window) {
  const int D = g.head_dim, rows = w.nt * G, GD = G * D;
  const int qkv_dim = (num_heads + 2 * g.kv_heads) * D;
  for (int i = threadIdx.x; i < rows * D; i += kThreads) {
    const int tok = i / GD, rest = i % GD;
    s.q[i] = qkv[(size_t)(w.t0 + tok) * qkv_dim + (size_t)kh * GD + rest];
  }
  if ((int)threadIdx.x < rows) {
    s.last[threadIdx.x] = positions[w.t0 + (int)threadIdx.x / G];
    s.first[threadIdx.x] = window_first(s.last[threadIdx.x], window);
  }
}

/* The smallest first position of the tile's tokens (the first granule any of them sees). */
__device__ inline int tile_first(const int32_t *positions, tile_work w, int window) {
  int lo = 0x7fffffff;
  for (int t = w.t0; t < w.t0 + w.nt; t++) {
    const int f = window_first(positions[t], window);
    lo = f < lo ? f : lo;
  }
  return lo;
}

/* The largest position of the tile's tokens, + 1. */
__device__ inline int tile_end(const int32_t *positions, tile_work w) {
  int hi = 0;
  for (int t = w.t0; t < w.t0 + w.nt; t++) hi = positions[t] + 1 > hi ? positions[t] + 1 : hi;
  return hi;
}

/* Split: block (x, kh, z) serves tile x of the step, KV head kh, granule z, and writes each row's partial at
 * ((token × num_heads + head) × granules + z). */
__global__ void split_kernel(const float *qkv, int num_seqs, int num_heads, const int32_t *positions,
                             const int32_t *query_start, const int32_t *tables, rill_kv_geom g, int layer, int window,
                             const __nv_bfloat16 *kc, const __nv_bfloat16 *vc, int granules, float *part_ml,
                             float *part_acc) {
  __shared__ block_state s;
  const int D = g.head_dim, G = num_heads / g.kv_heads, kh = blockIdx.y, z = blockIdx.z;
  /* Most blocks of a deep grid lie past every context of the step (at most kSplitMaxTokens tokens): they leave
   * before the tile search. */
  int step_hi = 0;
  for (int t = 0, T = query_start[num_seqs]; t < T; t++) {
    step_hi = positions[t] + 1 > step_hi ? positions[t] + 1 : step_hi;
  }
  if (z * g.granule >= step_hi) return;
  const tile_work w = find_tile(query_start, num_seqs, tile_tokens(G, D), blockIdx.x);
  if (w.nt == 0) return;
  const int hi = tile_end(positions, w), gb = z * g.granule;
  if (gb >= hi || gb + g.granule <= tile_first(positions, w, window)) return; /* uniform across the block */
  load_rows(s, qkv, num_heads, g, kh, positions, w, G, window);
  float acc[kPerThread];
  const int rows = w.nt * G;
  run_granule(s, acc, rows, D, 1.0f / sqrtf((float)D), kc, vc, tables + (size_t)w.seq * g.table_stride, g, layer, kh,
              gb, gb + g.granule, hi);
  const size_t head0 = (size_t)kh * G;
  if ((int)threadIdx.x < rows) {
    const int r = threadIdx.x, t = w.t0 + r / G;
    const size_t at = ((size_t)t * num_heads + head0 + (size_t)(r % G)) * granules + (size_t)z;
    part_ml[at * 2] = s.r[r].m;
    part_ml[at * 2 + 1] = s.r[r].l;
  }
#pragma unroll
  for (int k = 0; k < kPerThread; k++) {
    const int i = threadIdx.x + k * kThreads;
    if (i < rows * D) {
      const int r = i / D, t = w.t0 + r / G;
      const size_t at = ((size_t)t * num_heads + head0 + (size_t)(r % G)) * granules + (size_t)z;
      part_acc[at * D + (size_t)(i % D)] = acc[k];
    }
  }
}

/* Block (t, h): out[t][h] from the token's granules 0 .. ceil((positions[t] + 1) / granule) − 1, in order. */
__global__ void merge_kernel(int num_seqs, int num_heads, const int32_t *positions, const int32_t *query_start,
                             rill_kv_geom g, int window, const float *sinks, int granules, const float *part_ml,
                             const float *part_acc, float *out) {
  const int t = blockIdx.x, h = blockIdx.y, D = g.head_dim;
  if (t >= query_start[num_seqs]) return;
  const int ng = (positions[t] + g.granule) / g.granule, z0 = window_first(positions[t], window) / g.granule;
  const size_t part = ((size_t)t * num_heads + h) * granules;
  for (int d = threadIdx.x; d < D; d += blockDim.x) {
    float M = -INFINITY, L = 0.0f, A = 0.0f;
    for (int z = z0; z < ng; z++) {
      float a, b, m_new;
      merge_scales(M, part_ml[(part + z) * 2], &a, &b, &m_new);
      L = fmaf(part_ml[(part + z) * 2 + 1], b, L * a);
      A = fmaf(part_acc[(part + z) * D + d], b, A * a);
      M = m_new;
    }
    if (sinks != nullptr) {
      float a, lf;
      sink_final(M, L, sinks[h], &a, &lf);
      A = A * a;
      L = lf;
    }
    out[((size_t)t * num_heads + h) * D + d] = A / L;
  }
}

/* Prefill: block (x, kh) serves tile x of the step and KV head kh over all the granules its rows see, combining them
 * as merge_kernel does. */
__global__ void prefill_kernel(const float *qkv, int num_seqs, int num_heads, const int32_t *positions,
                               const int32_t *query_start, const int32_t *tables, rill_kv_geom g, int layer,
                               int window, const float *sinks, const __nv_bfloat16 *kc, const __nv_bfloat16 *vc,
                               float *out) {
  __shared__ block_state s;
  __shared__ row_state run[kMaxRows];
  __shared__ float scale_a[kMaxRows], scale_b[kMaxRows];
  const int D = g.head_dim, G = num_heads / g.kv_heads, kh = blockIdx.y;
  const tile_work w = find_tile(query_start, num_seqs, tile_tokens(G, D), blockIdx.x);
  if (w.nt == 0) return;
  const int hi = tile_end(positions, w), rows = w.nt * G;
  load_rows(s, qkv, num_heads, g, kh, positions, w, G, window);
  if ((int)threadIdx.x < rows) run[threadIdx.x] = row_state{-INFINITY, 0.0f};
  float acc[kPerThread], A[kPerThread];
#pragma unroll
  for (int k = 0; k < kPerThread; k++) A[k] = 0.0f;
  const int32_t *table = tables + (size_t)w.seq * g.table_stride;
  const float scale = 1.0f / sqrtf((float)D);
  for (int gb = tile_first(positions, w, window) / g.granule * g.granule; gb < hi; gb += g.granule) {
    run_granule(s, acc, rows, D, scale, kc, vc, table, g, layer, kh, gb, gb + g.granule, hi);
    if ((int)threadIdx.x < rows) {
      const int r = threadIdx.x;
      float a, b, m_new;
      merge_scales(run[r].m, s.r[r].m, &a, &b, &m_new);
      run[r].l = fmaf(s.r[r].l, b, run[r].l * a);
      run[r].m = m_new;
      scale_a[r] = a;
      scale_b[r] = b;
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < kPerThread; k++) {
      const int i = threadIdx.x + k * kThreads;
      if (i < rows * D) A[k] = fmaf(acc[k], scale_b[i / D], A[k] * scale_a[i / D]);
    }
  }
  __syncthreads();
  const size_t head0 = (size_t)kh * G;
#pragma unroll
  for (int k = 0; k < kPerThread; k++) {
    const int i = threadIdx.x + k * kThreads;
    if (i < rows * D) {
      const int r = i / D, t = w.t0 + r / G;
      float a_out = A[k], l_out = run[r].l;
      if (sinks != nullptr) {
        float a, lf;
        sink_final(run[r].m, run[r].l, sinks[head0 + (size_t)(r % G)], &a, &lf);
        a_out = a_out * a;
        l_out = lf;
      }
      out[((size_t)t * num_heads + head0 + (size_t)(r % G)) * D + (size_t)(i % D)] = a_out / l_out;
    }
  }
}

} // namespace

int rill_attention_granule(int max_positions) {
  int per = (max_positions + kMaxGranules - 1) / kMaxGranules;
  per = (per + kChunk - 1) / kChunk * kChunk;
  return per < kMinGranule ? kMinGranule : per;
}

int rill_attention_granules(rill_kv_geom g) {
  const int64_t span = (int64_t)g.table_stride * g.block_size;
  return (int)((span + g.granule - 1) / g.granule);
}

int rill_attention_supports(int num_heads, int kv_heads, int head_dim) {
  if (kv_heads < 1 || num_heads % kv_heads != 0 || head_dim < 2 || head_dim % 2 != 0 || head_dim > kMaxHeadDim) {
    return 0;
  }
  const int G = num_heads / kv_heads;
  return G <= kMaxRows && G * head_dim <= kRowElems;
}

cudaError_t rill_k_attention(cudaStream_t s, const float *qkv, int T, int num_seqs, int num_heads,
                             const int32_t *positions, const int32_t *query_start, const int32_t *tables,
                             rill_kv_geom g, int layer, int window, const float *sinks, const __nv_bfloat16 *kc,
                             const __nv_bfloat16 *vc, float *out, float *part_ml, float *part_acc) {
  if (T == 0 || num_seqs == 0) return cudaSuccess;
  const int G = num_heads / g.kv_heads, tpt = tile_tokens(G, g.head_dim);
  /* Each sequence's tiles: ceil(n_s / tpt) ≤ n_s / tpt + 1, so T / tpt + num_seqs bounds the step's. */
  const unsigned tiles = (unsigned)(T / tpt + num_seqs);
  if (T <= kSplitMaxTokens) {
    const int granules = rill_attention_granules(g);
    RILL_LAUNCH(split_kernel, dim3(tiles, (unsigned)g.kv_heads, (unsigned)granules), kThreads, s, qkv, num_seqs,
                num_heads, positions, query_start, tables, g, layer, window, kc, vc, granules, part_ml, part_acc);
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
    RILL_LAUNCH(merge_kernel, dim3((unsigned)T, (unsigned)num_heads), 128, s, num_seqs, num_heads, positions,
                query_start, g, window, sinks, granules, part_ml, part_acc, out);
    return cudaGetLastError();
  }
  RILL_LAUNCH(prefill_kernel, dim3(tiles, (unsigned)g.kv_heads), kThreads, s, qkv, num_seqs, num_heads, positions,
              query_start, tables, g, layer, window, sinks, kc, vc, out);
  return cudaGetLastError();
}
