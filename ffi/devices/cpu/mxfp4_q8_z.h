/*
 * The AVX-512 VNNI MXFP4 × int8 tile and its driver over experts as released (described in kernels_mxfp4_q8.c),
 * included there once per way of looking the nibbles up. Before including, define Z_TGT (the always-inline target
 * attribute), Z_NIBBLES (the lookup, nibbles_pshufb or nibbles_vbmi) and Z_FN(name) (the instance's names). No include
 * guard: meant to be included twice.
 */
Z_TGT void Z_FN(rows)(const int NT, const int NR, const int8_t *xq, const float *xs, int nb, const uint8_t *blocks,
                      const uint8_t *scales, int r, int r1, float *y, size_t ldy) {
  const size_t rb = (size_t)nb * 16;
  const __m512i zero = _mm512_setzero_si512(), twelve = _mm512_set1_epi8(12);
  /* Activations of four blocks, first halves then second halves (64-bit lanes of the pair of loads). */
  /* Lanes 4k to 4k + 3 take a group's scale q + k. */
  const __m512i quad0 = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0), step = _mm512_set1_epi32(4);
  __m512 acc[Z_ROWS][Z_TILE_T];
  _Pragma("GCC unroll 4") for (int i = 0; i < NR; i++) {
    _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) acc[i][t] = _mm512_setzero_ps();
  }
  const uint8_t *pf = r + NR + Q8_PF_ROWS <= r1 ? blocks + (size_t)(r + Q8_PF_ROWS) * rb : blocks + (size_t)r * rb;
  for (int g = 0; g < nb; g += 16) {
    const int ng = nb - g < 16 ? nb - g : 16;
    const __mmask16 gm = (__mmask16)((1u << ng) - 1u);
    /* One token: each row's products of the scales, once per group; several: the factors, multiplied per block. */
    __m512 wsg[Z_ROWS], xsg[Z_TILE_T];
    _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) xsg[t] = _mm512_maskz_loadu_ps(gm, xs + (size_t)t * (size_t)nb + (size_t)g);
    _Pragma("GCC unroll 4") for (int i = 0; i < NR; i++) {
      wsg[i] = half_scales_z(scales + (size_t)(r + i) * (size_t)nb + (size_t)g, gm);
      if (NT == 1) wsg[i] = _mm512_mul_ps(xsg[0], wsg[i]);
    }
    __m512i idx = quad0;
    for (int q = 0; q < ng; q += 4, idx = _mm512_add_epi32(idx, step)) {
      const int b = g + q, n = ng - q < 4 ? ng - q : 4;
      __m512i xa[Z_TILE_T], xb[Z_TILE_T], corr[Z_TILE_T];
      __m512 xsv[Z_TILE_T];
      _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
        const int8_t *xp = xq + ((size_t)t * (size_t)nb + (size_t)b) * 32;
        quad_q8(xp, n, &xa[t], &xb[t]);
        corr[t] = _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(zero, twelve, xa[t]), twelve, xb[t]));
        if (NT > 1) xsv[t] = _mm512_permutexvar_ps(idx, xsg[t]);
      }
      _Pragma("GCC unroll 4") for (int i = 0; i < NR; i++) {
        _mm_prefetch((const char *)(pf + (size_t)i * rb + (size_t)b * 16), _MM_HINT_T1);
        const __m512i qv = quad_blocks(blocks + (size_t)(r + i) * rb + (size_t)b * 16, n);
        __m512i wa, wb;
        Z_NIBBLES(qv, &wa, &wb);
        const __m512 wsv = _mm512_permutexvar_ps(idx, wsg[i]);
        _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
          const __m512i d = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(corr[t], wa, xa[t]), wb, xb[t]);
          acc[i][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d), NT == 1 ? wsv : _mm512_mul_ps(xsv[t], wsv), acc[i][t]);
        }
      }
    }
  }
  _Pragma("GCC unroll 4") for (int i = 0; i < NR; i++) {
    _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) y[(size_t)t * ldy + (size_t)(r + i)] = hsum16_z(acc[i][t]);
  }
}

Z_TGT void Z_FN(gemm)(const int8_t *xq, const float *xs, int T, const uint8_t *blocks,
                      const uint8_t *scales, int nb, int r0, int r1, float *y, size_t ldy) {
  for (int t = 0; t < T; t += Z_TILE_T) {
    const int nt = T - t < Z_TILE_T ? T - t : Z_TILE_T;
    const int8_t *xt = xq + (size_t)t * (size_t)nb * 32;
    const float *st = xs + (size_t)t * (size_t)nb;
    float *yt = y + (size_t)t * ldy;
    /* Three or four tokens take two rows at a time, so the tile's accumulators and activations stay in registers. */
    const int rows = nt > 2 ? 2 : Z_ROWS;
    for (int r = r0; r < r1; r += rows) {
      const int nr = r1 - r < rows ? r1 - r : rows;
      /* Constant shapes, so every tile's loops unroll into registers. */
      switch (nt * 8 + nr) {
      case 9: Z_FN(rows)(1, 1, xt, st, nb, blocks, scales, r, r1, yt, ldy); break;
      case 10: Z_FN(rows)(1, 2, xt, st, nb, blocks, scales, r, r1, yt, ldy); break;
      case 11: Z_FN(rows)(1, 3, xt, st, nb, blocks, scales, r, r1, yt, ldy); break;
      case 12: Z_FN(rows)(1, 4, xt, st, nb, blocks, scales, r, r1, yt, ldy); break;
      case 17: Z_FN(rows)(2, 1, xt, st, nb, blocks, scales, r, r1, yt, ldy); break;
      case 18: Z_FN(rows)(2, 2, xt, st, nb, blocks, scales, r, r1, yt, ldy); break;
      case 19: Z_FN(rows)(2, 3, xt, st, nb, blocks, scales, r, r1, yt, ldy); break;
      case 20: Z_FN(rows)(2, 4, xt, st, nb, blocks, scales, r, r1, yt, ldy); break;
      case 25: Z_FN(rows)(3, 1, xt, st, nb, blocks, scales, r, r1, yt, ldy); break;
      case 26: Z_FN(rows)(3, 2, xt, st, nb, blocks, scales, r, r1, yt, ldy); break;
      case 33: Z_FN(rows)(4, 1, xt, st, nb, blocks, scales, r, r1, yt, ldy); break;
      default: Z_FN(rows)(4, 2, xt, st, nb, blocks, scales, r, r1, yt, ldy); break;
      }
    }
  }
}
