/*
 * int8 weight rows regrouped in groups of 16 blocks for AVX-512 VNNI (the table entry gemm_q8_g16), and the
 * regrouping itself.
 *
 * Layout of a regrouped q8 row (same length as rill_q8_row_bytes, scales untouched after the quants): the quants of
 * group g (blocks 16g to 16g + n − 1, n = 16 but for a partial last group) fill bytes [512g, 512g + 32n); inside,
 * dword j (bytes 4j to 4j + 3) of block k sits at 4 · (j · n + k), and every byte is stored as w + 128 (unsigned).
 * One 64-byte load then holds the same dword of 16 blocks, so int32 lane k of a vpdpbusd belongs to block k: a group
 * costs per (row, token) eight vpdpbusd into one register, one conversion and one fused multiply-add with the 16
 * blocks' scales, where the release order costs two vpdpbusd, a conversion, a multiply and a fused multiply-add per
 * four blocks plus the permutes that spread them; the unsigned bytes need no flipping per load.
 */
#include <string.h>

#include "kernels.h"

void rill_q8_group16(int8_t *row, int nblocks) {
  uint8_t tmp[16 * RILL_Q8_BLOCK];
  for (int g = 0; g < nblocks; g += 16) {
    const int n = nblocks - g < 16 ? nblocks - g : 16;
    uint8_t *q = (uint8_t *)row + (size_t)g * RILL_Q8_BLOCK;
    for (int k = 0; k < n; k++) {
      for (int i = 0; i < RILL_Q8_BLOCK; i++) {
        tmp[4 * ((i / 4) * n + k) + i % 4] = (uint8_t)(q[k * RILL_Q8_BLOCK + i] ^ 0x80u);
      }
    }
    memcpy(q, tmp, (size_t)n * RILL_Q8_BLOCK);
  }
}

int8_t rill_q8_g16_quant(const int8_t *row, int nblocks, int c) {
  const int b = c / RILL_Q8_BLOCK, i = c % RILL_Q8_BLOCK, g = b - b % 16;
  const int n = nblocks - g < 16 ? nblocks - g : 16;
  const uint8_t u = (uint8_t)row[(size_t)g * RILL_Q8_BLOCK + (size_t)(4 * ((i / 4) * n + b % 16) + i % 4)];
  return (int8_t)(u ^ 0x80u);
}

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include "g16_prep.h"
#include "hsum16.h"

#define TGT                                                                                                            \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c,avx512vnni"), always_inline)) static inline
#define TGT_FN __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c,avx512vnni")))

_Static_assert((RILL_Q8_G16_MAX_BLOCKS + 15) / 16 * sizeof(g16_prepped) <= G16_PREP_BYTES,
               "one token's prepared groups fit the scratch");
/* Tiles of several rows prefetch the rows PF_ROWS ahead into L2 (from DRAM, 2 threads: 4 tokens 31 GB/s against 25
 * into L1, 8 tokens 23 against 21). Where a strip of rows serves several tiles of tokens, tile k of n prefetches only
 * the rows i with i mod n = k, so the next rows are requested all through the strip: requested by the first tile
 * alone, the memory idles while the later tiles compute from L1 (from DRAM, one thread, 8 tokens: 70% of the probe's
 * bandwidth that way, 84% spread). A single token reads one row at a time, one sequential stream, prefetched into L2
 * ROW_PF bytes ahead: from DRAM, one thread, 2880-wide rows, 0.5–2.5 KB ahead read 85–96% of the probe's bandwidth,
 * none 57–72% (the hardware prefetcher alone), 3 KB 75–81% and 4–16 KB 48–60%. */
#define PF_ROWS 8
#define ROW_PF 2048
#define TILE_T 4

/* NR rows from r × NT tokens. Per (row, token) the sequence is fixed: groups in order, each one's int32 lanes summed
 * exactly (the two chains of a single row and token are added as integers), converted and fused-multiply-added with
 * (activation scale × weight scale) into one 16-lane accumulator, then hsum16_z; the rows and tokens alongside only
 * change which registers hold them, so a token alone gives the bits it gets in any batch. */
TGT void rows(const int NR, const int NT, const g16_prepped *px, int ngroups, const float *xs, int nb,
              const uint8_t *w, size_t ldw, int r, float *y, size_t ldy, int tile, int ntiles) {
  __m512 acc[4][TILE_T];
  _Pragma("GCC unroll 4") for (int i = 0; i < NR; i++) {
    _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) acc[i][t] = _mm512_setzero_ps();
  }
  const size_t quants = (size_t)nb * RILL_Q8_BLOCK;
  for (int gi = 0; gi < ngroups; gi++) {
    const int g = gi * 16, n = nb - g < 16 ? nb - g : 16;
    const __mmask16 gm = (__mmask16)((1u << n) - 1u);
    const __mmask64 vm = n == 16 ? ~(__mmask64)0 : ((__mmask64)1 << (4 * n)) - 1u;
    __m512 ws[4];
    _Pragma("GCC unroll 4") for (int i = 0; i < NR; i++) {
      ws[i] = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(gm, w + (size_t)(r + i) * ldw + quants + (size_t)g * 2));
    }
    if (NT == 1 && NR == 1) {
      const g16_prepped *p = px + gi;
      const uint8_t *gp = w + (size_t)r * ldw + (size_t)g * RILL_Q8_BLOCK;
      __m512i d0 = p->off, d1 = _mm512_setzero_si512();
      _Pragma("GCC unroll 8") for (int j = 0; j < 8; j += 2) {
        _mm_prefetch((const char *)gp + (size_t)(4 * n * j) + ROW_PF, _MM_HINT_T1);
        _mm_prefetch((const char *)gp + (size_t)(4 * n * j) + ROW_PF + 64, _MM_HINT_T1);
        d0 = _mm512_dpbusd_epi32(d0, _mm512_maskz_loadu_epi8(vm, gp + (size_t)(4 * n * j)), p->x[j]);
        d1 = _mm512_dpbusd_epi32(d1, _mm512_maskz_loadu_epi8(vm, gp + (size_t)(4 * n * (j + 1))), p->x[j + 1]);
      }
      const __m512 s = _mm512_mul_ps(_mm512_maskz_loadu_ps(gm, xs + g), ws[0]);
      acc[0][0] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(d0, d1)), s, acc[0][0]);
      continue;
    }
    __m512i d[4][TILE_T];
    _Pragma("GCC unroll 4") for (int i = 0; i < NR; i++) {
      _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) d[i][t] = px[(size_t)t * (size_t)ngroups + (size_t)gi].off;
    }
    _Pragma("GCC unroll 8") for (int j = 0; j < 8; j++) {
      __m512i wv[4];
      _Pragma("GCC unroll 4") for (int i = 0; i < NR; i++) {
        const uint8_t *gp = w + (size_t)(r + i) * ldw + (size_t)g * RILL_Q8_BLOCK + (size_t)(4 * n * j);
        if (i % ntiles == tile) _mm_prefetch((const char *)gp + (size_t)PF_ROWS * ldw, _MM_HINT_T1);
        wv[i] = _mm512_maskz_loadu_epi8(vm, gp);
      }
      _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
        const __m512i xv = px[(size_t)t * (size_t)ngroups + (size_t)gi].x[j];
        _Pragma("GCC unroll 4") for (int i = 0; i < NR; i++) d[i][t] = _mm512_dpbusd_epi32(d[i][t], wv[i], xv);
      }
    }
    _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
      const __m512 xsg = _mm512_maskz_loadu_ps(gm, xs + (size_t)t * (size_t)nb + (size_t)g);
      _Pragma("GCC unroll 4") for (int i = 0; i < NR; i++) {
        acc[i][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d[i][t]), _mm512_mul_ps(xsg, ws[i]), acc[i][t]);
      }
    }
  }
  _Pragma("GCC unroll 4") for (int i = 0; i < NR; i++) {
    _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) y[(size_t)t * ldy + (size_t)(r + i)] = hsum16_z(acc[i][t]);
  }
}

/* A single token takes one row at a time; several take four rows at a time, tokens in tiles of TILE_T, so the rows'
 * weights serve every token of the chunk from the L1 before the next rows come. */
TGT_FN void rill_gemm_q8_g16_avx512_vnni(const int8_t *xq, const float *xs, int T, const int8_t *w8, size_t ldw,
                                         int nb, int r0, int r1, float *y, size_t ldy) {
  g16_prepped px[G16_PREP_BYTES / sizeof(g16_prepped)];
  const uint8_t *w = (const uint8_t *)w8;
  const int ngroups = (nb + 15) / 16;
  int chunk = (int)(G16_PREP_BYTES / sizeof(g16_prepped)) / ngroups;
  if (chunk > TILE_T) chunk -= chunk % TILE_T;
  for (int tc = 0; tc < T; tc += chunk) {
    const int te = T - tc < chunk ? T : tc + chunk;
    for (int t = tc; t < te; t++) {
      prep_g16(xq + (size_t)t * (size_t)nb * RILL_Q8_BLOCK, nb, 0x80, px + (size_t)(t - tc) * (size_t)ngroups);
    }
    const int step = te - tc == 1 ? 1 : 4;
    for (int r = r0; r < r1; r += step) {
      const int nr = r1 - r < step ? r1 - r : step;
      for (int t = tc; t < te; t += TILE_T) {
        const int nt = te - t < TILE_T ? te - t : TILE_T;
        const g16_prepped *pt = px + (size_t)(t - tc) * (size_t)ngroups;
        const float *st = xs + (size_t)t * (size_t)nb;
        float *yt = y + (size_t)t * ldy;
        const int tile = (t - tc) / TILE_T, tiles = (te - tc + TILE_T - 1) / TILE_T;
        switch (nr * 8 + nt) {
        case 9: rows(1, 1, pt, ngroups, st, nb, w, ldw, r, yt, ldy, tile, tiles); break;
        case 10: rows(1, 2, pt, ngroups, st, nb, w, ldw, r, yt, ldy, tile, tiles); break;
        case 11: rows(1, 3, pt, ngroups, st, nb, w, ldw, r, yt, ldy, tile, tiles); break;
        case 12: rows(1, 4, pt, ngroups, st, nb, w, ldw, r, yt, ldy, tile, tiles); break;
        case 17: rows(2, 1, pt, ngroups, st, nb, w, ldw, r, yt, ldy, tile, tiles); break;
        case 18: rows(2, 2, pt, ngroups, st, nb, w, ldw, r, yt, ldy, tile, tiles); break;
        case 19: rows(2, 3, pt, ngroups, st, nb, w, ldw, r, yt, ldy, tile, tiles); break;
        case 20: rows(2, 4, pt, ngroups, st, nb, w, ldw, r, yt, ldy, tile, tiles); break;
        case 25: rows(3, 1, pt, ngroups, st, nb, w, ldw, r, yt, ldy, tile, tiles); break;
        case 26: rows(3, 2, pt, ngroups, st, nb, w, ldw, r, yt, ldy, tile, tiles); break;
        case 27: rows(3, 3, pt, ngroups, st, nb, w, ldw, r, yt, ldy, tile, tiles); break;
        case 28: rows(3, 4, pt, ngroups, st, nb, w, ldw, r, yt, ldy, tile, tiles); break;
        case 33: rows(4, 1, pt, ngroups, st, nb, w, ldw, r, yt, ldy, tile, tiles); break;
        case 34: rows(4, 2, pt, ngroups, st, nb, w, ldw, r, yt, ldy, tile, tiles); break;
        case 35: rows(4, 3, pt, ngroups, st, nb, w, ldw, r, yt, ldy, tile, tiles); break;
        default: rows(4, 4, pt, ngroups, st, nb, w, ldw, r, yt, ldy, tile, tiles); break;
        }
      }
    }
  }
}
#endif
