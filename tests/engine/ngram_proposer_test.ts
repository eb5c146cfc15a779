import assert from "node:assert/strict";
import fc from "fast-check";
import { NgramProposer } from "../../engine/ngram_proposer.ts";

Deno.test("ngram: proposes the continuation of the most recent earlier match of the longest n-gram", () => {
  const p = new NgramProposer({ minN: 1, maxN: 3 });
  const h = [1, 2, 3, 9, 1, 2, 3, 7, 8, 5, 1, 2, 3];
  // The most recent earlier "1 2 3" starts at 4, followed by 7 8 5.
  assert.deepEqual(p.propose(h, h.length, 3), [7, 8, 5]);
  assert.deepEqual(p.propose(h, h.length, 1), [7]);
  assert.deepEqual(p.propose([4, 5, 6], 3, 3), []);
  assert.deepEqual(p.propose(h, h.length, 0), []);
});

Deno.test("ngram: a short period yields a full-length draft by copying through the draft itself", () => {
  const p = new NgramProposer({ minN: 2, maxN: 2 });
  const h = [7, 1, 2, 1, 2];
  assert.deepEqual(p.propose(h, h.length, 5), [1, 2, 1, 2, 1]);
});

Deno.test("ngram: respects the logical length, not the buffer size, and minN", () => {
  const p = new NgramProposer({ minN: 2, maxN: 3 });
  const buf = Int32Array.from([5, 6, 5, 6, 0, 0, 0]);
  assert.deepEqual(p.propose(buf, 4, 2), [5, 6]);
  assert.deepEqual(p.propose([5, 6, 7, 6], 4, 2), [], "only a 1-gram recurs, below minN");
  assert.throws(() => new NgramProposer({ minN: 3, maxN: 2 }), RangeError);
});

Deno.test("ngram: a draft always continues an earlier occurrence of the tail (property)", () => {
  fc.assert(
    fc.property(
      fc.array(fc.integer({ min: 0, max: 3 }), { minLength: 2, maxLength: 40 }),
      fc.integer({ min: 1, max: 6 }),
      (h, k) => {
        const p = new NgramProposer({ minN: 1, maxN: 3 });
        const draft = p.propose(h, h.length, k);
        if (draft.length === 0) {
          // Then even the last token never occurred before.
          assert.ok(!h.slice(0, -1).includes(h.at(-1)!));
          return;
        }
        assert.equal(draft.length, k);
        const ext = [...h, ...draft];
        // Some i < tail with ext[i..i+n) == tail n-gram and ext[i+n+j] == draft[j] for all j.
        const ok = [1, 2, 3].some((n) => {
          if (n > h.length - 1) return false;
          const tail = h.length - n;
          for (let i = tail - 1; i >= 0; i--) {
            if (
              h.slice(i, i + n).every((v, j) => v === h[tail + j]) && draft.every((d, j) => ext[i + n + j] === d)
            ) return true;
          }
          return false;
        });
        assert.ok(ok);
      },
    ),
  );
});
