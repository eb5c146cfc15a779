/*
 * The AVX-512 VNNI MXFP4 × int8 kernel over experts regrouped by rill_mxfp4_group16 (kernels_mxfp4_q8.c describes the
 * layout), included there once per way of looking the nibbles up, like mxfp4_q8_z.h: define Z_TGT, Z_NIBBLES and
 * Z_FN first. No include guard: meant to be included twice.
 *
 * Int32 lane k of every product belongs to block k of a group of 16, so a group costs per (row, token) eight vpdpbusd
 * into one register, one conversion and one fused multiply-add, where the release layout's four lanes per block cost
 * four of each; the scales need no spreading (lane k takes block k's). The activations are laid out to match once
 * per call (G16_PREP_BYTES of stack scratch, tokens in chunks); a lane's int32 sum is exact (at most 32 · 24 · 127 plus
 * the offset), so per (row, token) the sequence — groups in order, each converted and fused-multiply-added into one
 * 16-lane accumulator, then hsum16_z — does not depend on the tokens or rows computed alongside.
 */

/* Activations meet the experts as g16_prep.h lays them out with bias 12 (the table holds w + 12): the low nibbles of
 * a block's weight bytes [4j, 4j + 4) meet x[j] (activations 4j to 4j + 3 in MXFP4 order), the high ones x[4 + j]
 * (activations 16 + 4j to 19 + 4j). */
/* NR rows × NT tokens; px: the tokens' prepared groups (token t at px + t · ngroups). */
Z_TGT void Z_FN(rows_g16)(const int NT, const int NR, const g16_prepped *px, int ngroups, const float *xs, int nb,
                          const uint8_t *blocks, const uint8_t *scales, int r, int r1, float *y, size_t ldy) {
  const size_t rb = (size_t)nb * 16;
  __m512 acc[Z_ROWS][Z_TILE_T];
  _Pragma("GCC unroll 4") for (int i = 0; i < NR; i++) {
    _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) acc[i][t] = _mm512_setzero_ps();
  }
  /* The tile reads rows r to r + NR − 1, adjacent in memory, as NR interleaved streams; each line is prefetched into
   * L2 G16_PF_BYTES further on in memory (the rows of the tiles after this one), none where that passes row r1. */
  const size_t pf = (size_t)(r + NR) * rb + G16_PF_BYTES <= (size_t)r1 * rb ? G16_PF_BYTES : 0;
  for (int gi = 0; gi < ngroups; gi++) {
    const int g = gi * 16, ng = nb - g < 16 ? nb - g : 16;
    const __mmask16 gm = (__mmask16)((1u << ng) - 1u);
    const __mmask64 vm = ng == 16 ? ~(__mmask64)0 : ((__mmask64)1 << (4 * ng)) - 1u;
    __m512 ws[Z_ROWS], xsg[Z_TILE_T];
    _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
      xsg[t] = _mm512_maskz_loadu_ps(gm, xs + (size_t)t * (size_t)nb + (size_t)g);
    }
    __m512i d[Z_ROWS][Z_TILE_T];
    _Pragma("GCC unroll 4") for (int i = 0; i < NR; i++) {
      /* s − 128 (rill_mxfp4_group16 stores each scale so, as a signed byte): vscalefps then gives the activation
       * scale × 2^(s − 128), rounded once, the same bits as multiplying by half_scale[s] in every range. */
      const uint8_t *sp = scales + (size_t)(r + i) * (size_t)nb + (size_t)g;
      ws[i] = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(gm, sp)));
      if (NT == 1) ws[i] = _mm512_scalef_ps(xsg[0], ws[i]);
      _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) d[i][t] = px[(size_t)t * (size_t)ngroups + (size_t)gi].off;
    }
    _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) {
      _Pragma("GCC unroll 4") for (int i = 0; i < NR; i++) {
        const uint8_t *gp = blocks + (size_t)(r + i) * rb + (size_t)g * 16;
        _mm_prefetch((const char *)(gp + (size_t)(4 * ng * j) + pf), _MM_HINT_T1);
        /* Each prefetch stays in program order beside its row's load: GCC otherwise moves the unrolled tile's
         * prefetches together, and from DRAM (one thread, one token) the kernel then reads 72–76% of the probe's
         * bandwidth instead of 77–84%. */
        __asm__ volatile("" ::: "memory");
        const __m512i qv = _mm512_maskz_loadu_epi8(vm, gp + (size_t)(4 * ng * j));
        __m512i wa, wb;
        Z_NIBBLES(qv, &wa, &wb);
        _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
          const g16_prepped *p = px + (size_t)t * (size_t)ngroups + (size_t)gi;
          d[i][t] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(d[i][t], wa, p->x[j]), wb, p->x[4 + j]);
        }
      }
    }
    _Pragma("GCC unroll 4") for (int i = 0; i < NR; i++) {
      _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
        acc[i][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d[i][t]), NT == 1 ? ws[i] : _mm512_scalef_ps(xsg[t], ws[i]),
                                    acc[i][t]);
      }
    }
  }
  _Pragma("GCC unroll 4") for (int i = 0; i < NR; i++) {
    _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) y[(size_t)t * ldy + (size_t)(r + i)] = hsum16_z(acc[i][t]);
  }
}

Z_TGT void Z_FN(gemm_g16)(const int8_t *xq, const float *xs, int T, const uint8_t *blocks, const uint8_t *scales,
                          int nb, int r0, int r1, float *y, size_t ldy) {
  g16_prepped px[G16_PREP_BYTES / sizeof(g16_prepped)];
  const int ngroups = (nb + 15) / 16;
  int chunk = (int)(G16_PREP_BYTES / sizeof(g16_prepped)) / ngroups;
  if (chunk > Z_TILE_T) chunk -= chunk % Z_TILE_T;
  for (int tc = 0; tc < T; tc += chunk) {
    const int te = T - tc < chunk ? T : tc + chunk;
    for (int t = tc; t < te; t++) {
      prep_g16(xq + (size_t)t * (size_t)nb * 32, nb, 12, px + (size_t)(t - tc) * (size_t)ngroups);
    }
    for (int t = tc; t < te; t += Z_TILE_T) {
      const int nt = te - t < Z_TILE_T ? te - t : Z_TILE_T;
      const g16_prepped *pt = px + (size_t)(t - tc) * (size_t)ngroups;
      const float *st = xs + (size_t)t * (size_t)nb;
      float *yt = y + (size_t)t * ldy;
      /* Three or four tokens take two rows at a time, so the tile's accumulators stay in registers. */
      const int rows = nt > 2 ? 2 : Z_ROWS;
      for (int r = r0; r < r1; r += rows) {
        const int nr = r1 - r < rows ? r1 - r : rows;
        switch (nt * 8 + nr) {
        case 9: Z_FN(rows_g16)(1, 1, pt, ngroups, st, nb, blocks, scales, r, r1, yt, ldy); break;
        case 10: Z_FN(rows_g16)(1, 2, pt, ngroups, st, nb, blocks, scales, r, r1, yt, ldy); break;
        case 11: Z_FN(rows_g16)(1, 3, pt, ngroups, st, nb, blocks, scales, r, r1, yt, ldy); break;
        case 12: Z_FN(rows_g16)(1, 4, pt, ngroups, st, nb, blocks, scales, r, r1, yt, ldy); break;
        case 17: Z_FN(rows_g16)(2, 1, pt, ngroups, st, nb, blocks, scales, r, r1, yt, ldy); break;
        case 18: Z_FN(rows_g16)(2, 2, pt, ngroups, st, nb, blocks, scales, r, r1, yt, ldy); break;
        case 19: Z_FN(rows_g16)(2, 3, pt, ngroups, st, nb, blocks, scales, r, r1, yt, ldy); break;
        case 20: Z_FN(rows_g16)(2, 4, pt, ngroups, st, nb, blocks, scales, r, r1, yt, ldy); break;
        case 25: Z_FN(rows_g16)(3, 1, pt, ngroups, st, nb, blocks, scales, r, r1, yt, ldy); break;
        case 26: Z_FN(rows_g16)(3, 2, pt, ngroups, st, nb, blocks, scales, r, r1, yt, ldy); break;
        case 33: Z_FN(rows_g16)(4, 1, pt, ngroups, st, nb, blocks, scales, r, r1, yt, ldy); break;
        default: Z_FN(rows_g16)(4, 2, pt, ngroups, st, nb, blocks, scales, r, r1, yt, ldy); break;
        }
      }
    }
  }
}
