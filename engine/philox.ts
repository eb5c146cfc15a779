/**
 * Philox4x32-10, the counter-based generator every rill device samples with (docs/random.md). A draw is a pure
 * function of (seed, position, draw index): nothing carries over between calls, so the same seed gives the same
 * token whether a sequence runs alone, batched, or with speculation.
 */

const M0 = 0xd2511f53;
const M1 = 0xcd9e8d57;
const W0 = 0x9e3779b9;
const W1 = 0xbb67ae85;

/** The high 32 bits of the 64-bit product of two uint32 (exact: every partial sum stays below 2^53). */
function mulhi(a: number, b: number): number {
  const ah = a >>> 16;
  const al = a & 0xffff;
  const bh = b >>> 16;
  const bl = b & 0xffff;
  const m1 = ah * bl;
  const m2 = al * bh;
  const mid = ((al * bl) >>> 16) + (m1 & 0xffff) + (m2 & 0xffff);
  return (ah * bh + Math.floor(m1 / 65536) + Math.floor(m2 / 65536) + Math.floor(mid / 65536)) >>> 0;
}

/** Philox4x32-10 of counter (c0..c3) under key (k0, k1); writes the four output words into `out`. */
export function philox4x32(
  c0: number,
  c1: number,
  c2: number,
  c3: number,
  k0: number,
  k1: number,
  out: Uint32Array,
): void {
  for (let round = 0; round < 10; round++) {
    if (round > 0) {
      k0 = (k0 + W0) >>> 0;
      k1 = (k1 + W1) >>> 0;
    }
    const hi0 = mulhi(M0, c0);
    const lo0 = Math.imul(M0, c0) >>> 0;
    const hi1 = mulhi(M1, c2);
    const lo1 = Math.imul(M1, c2) >>> 0;
    const n0 = (hi1 ^ c1 ^ k0) >>> 0;
    const n2 = (hi0 ^ c3 ^ k1) >>> 0;
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
  }
  out[0] = c0;
  out[1] = c1;
  out[2] = c2;
  out[3] = c3;
}

const scratch = new Uint32Array(4);

/**
 * uniform(seed, position, draw): a double in [0, 1) with 53 random bits, from the first two output words of
 * Philox4x32-10 keyed by the seed's low and high words and countered by (position, draw, 0, 0).
 */
export function philoxUniform(seed: bigint, position: number, draw: number): number {
  const k0 = Number(seed & 0xffffffffn);
  const k1 = Number((seed >> 32n) & 0xffffffffn);
  philox4x32(position >>> 0, draw >>> 0, 0, 0, k0, k1, scratch);
  return ((scratch[0]! >>> 5) * 67108864 + (scratch[1]! >>> 6)) / 9007199254740992;
}
