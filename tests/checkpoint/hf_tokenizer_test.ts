import assert from "node:assert/strict";
import fc from "fast-check";
import { HfTokenizer, HfTokenizerError } from "../../checkpoint/hf_tokenizer.ts";

const FIXTURES = new URL("../fixtures/tokenizers/", import.meta.url);

function loadJson(name: string): Record<string, unknown> {
  return JSON.parse(Deno.readTextFileSync(new URL(name, FIXTURES)));
}

const byteLevelJson = loadJson("byte_level.json");
const spJson = loadJson("sentencepiece.json");
const bl = HfTokenizer.fromJSON(byteLevelJson);
const sp = HfTokenizer.fromJSON(spJson);

function ids(tok: HfTokenizer, tokens: string[]): number[] {
  return tokens.map((t) => {
    const id = tok.tokenToId(t);
    assert.notEqual(id, undefined, `fixture lacks token ${t}`);
    return id!;
  });
}

function tokens(tok: HfTokenizer, list: number[]): string[] {
  return list.map((id) => tok.idToToken(id) ?? `#${id}`);
}

/** Deep-copies a fixture and lets a test change one part of it. */
function variant(json: Record<string, unknown>, edit: (j: Record<string, unknown>) => void): HfTokenizer {
  const copy = structuredClone(json);
  edit(copy);
  return HfTokenizer.fromJSON(copy);
}

Deno.test("byte-level: merges apply by rank, not by longest match", () => {
  // h e l l o: "h e" (rank 1) beats "l l" (rank 3); once "he" exists, "e ll" (rank 4) can never fire, so the
  // chain that would build "hello" (e ll → h ell → hell o) is unreachable.
  assert.deepEqual(tokens(bl, bl.encode("hello")), ["he", "ll", "o"]);
  // Ġ t h e: "Ġ t" (0), then "h e" (1), then "Ġt he" (2).
  assert.deepEqual(tokens(bl, bl.encode(" the")), ["Ġthe"]);
  assert.deepEqual(tokens(bl, bl.encode(" world")), ["Ġworld"]);
  // Ties go to the leftmost pair.
  assert.deepEqual(tokens(bl, bl.encode("aaa")), ["aa", "a"]);
  assert.deepEqual(tokens(bl, bl.encode("aaaaa")), ["aa", "aa", "a"]);
  // Pre-tokens never merge across the split: "hello" and " the" are separate words.
  assert.deepEqual(tokens(bl, bl.encode("hello the")), ["he", "ll", "o", "Ġthe"]);
});

Deno.test("byte-level: multi-byte characters use byte tokens and merges over them", () => {
  assert.deepEqual(tokens(bl, bl.encode("é")), ["Ã©"]);
  const emoji = bl.encode("😀");
  assert.equal(emoji.length, 4);
  assert.deepEqual([...emoji.flatMap((id) => [...bl.tokenBytes(id)])], [0xf0, 0x9f, 0x98, 0x80]);
  for (const s of ["é", "😀", "中文", "naïve café 😀👍🏽 中文字符", "tab\tnew\nline\r\n  spaces   ", ""]) {
    assert.equal(bl.decode(bl.encode(s)), s);
  }
});

Deno.test("byte-level: merges given as [a, b] pairs load the same as 'a b' strings", () => {
  const pairs = variant(byteLevelJson, (j) => {
    const model = j.model as { merges: string[] };
    (model as { merges: unknown }).merges = model.merges.map((m) => m.split(" "));
  });
  for (const s of ["hello the world", "aaaa é", " the  world"]) assert.deepEqual(pairs.encode(s), bl.encode(s));
});

Deno.test("byte-level: ByteLevel use_regex (GPT-2 split) and add_prefix_space", () => {
  const gpt2 = variant(byteLevelJson, (j) => {
    j.pre_tokenizer = { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: true };
  });
  assert.deepEqual(tokens(gpt2, gpt2.encode("hello the world")), ["he", "ll", "o", "Ġthe", "Ġworld"]);
  // GPT-2's regex keeps a run of spaces before a word as its own pre-token except the last space.
  assert.deepEqual(tokens(gpt2, gpt2.encode("a   the")), ["a", "ĠĠ", "Ġthe"]);
  const prefixed = variant(byteLevelJson, (j) => {
    j.pre_tokenizer = { type: "ByteLevel", add_prefix_space: true, use_regex: true };
  });
  assert.deepEqual(tokens(prefixed, prefixed.encode("the")), ["Ġthe"]);
});

Deno.test("byte-level: added tokens are matched anywhere by encode and never by encodeOrdinary", () => {
  const start = bl.specialId("<|im_start|>")!;
  const end = bl.specialId("<|im_end|>")!;
  const think = bl.specialId("<think>")!;
  assert.deepEqual(bl.encode("<|im_start|>"), [start]);
  const text = "hello<|im_end|>aa<think>the<|im_start|><|im_end|>";
  assert.deepEqual(
    bl.encode(text),
    [...ids(bl, ["he", "ll", "o"]), end, ...ids(bl, ["aa"]), think, ...ids(bl, ["t", "he"]), start, end],
  );
  const ordinary = bl.encodeOrdinary(text);
  for (const id of [start, end, think]) assert.ok(!ordinary.includes(id));
  assert.equal(bl.decode(ordinary), text);
  assert.equal(bl.decode(bl.encode(text)), text);
});

Deno.test("byte-level: special flags and token bytes", () => {
  const eot = bl.specialId("<|endoftext|>")!;
  assert.ok(bl.isSpecial(eot));
  // Qwen marks <think> as a non-special added token: matched by encode, but shown as text.
  assert.ok(!bl.isSpecial(bl.specialId("<think>")!));
  assert.ok(!bl.isSpecial(bl.tokenToId("he")!));
  assert.deepEqual(bl.tokenBytes(eot), new TextEncoder().encode("<|endoftext|>"));
  assert.deepEqual(bl.tokenBytes(bl.tokenToId("Ġ")!), Uint8Array.of(0x20));
  assert.deepEqual(bl.tokenBytes(bl.tokenToId("Ċ")!), Uint8Array.of(0x0a));
  assert.equal(bl.specialId("he"), undefined);
  assert.equal(bl.vocabSize, 279);
  // Ids past the tokenizer (padded embedding rows) decode to nothing instead of throwing.
  assert.equal(bl.tokenBytes(bl.vocabSize + 5).length, 0);
});

/** The textbook O(n²) BPE: repeatedly merge the lowest-rank adjacent pair, leftmost first. */
function referenceBpe(symbols: string[], ranks: Map<string, number>): string[] {
  const s = [...symbols];
  for (;;) {
    let best = -1, bestRank = Infinity;
    for (let i = 0; i + 1 < s.length; i++) {
      const r = ranks.get(`${s[i]} ${s[i + 1]}`);
      if (r !== undefined && r < bestRank) {
        bestRank = r;
        best = i;
      }
    }
    if (best < 0) return s;
    s.splice(best, 2, s[best]! + s[best + 1]!);
  }
}

Deno.test("byte-level: heap BPE equals the reference BPE on random words", () => {
  const merges = (byteLevelJson.model as { merges: string[] }).merges;
  const ranks = new Map(merges.map((m, i) => [m, i]));
  const noSplit = variant(byteLevelJson, (j) => {
    j.pre_tokenizer = { type: "ByteLevel", add_prefix_space: false, use_regex: false };
  });
  fc.assert(
    fc.property(fc.array(fc.constantFrom("a", "h", "e", "l", "o", "w", "r", "d", "t", " ", "é"), { maxLength: 40 }), (
      chars,
    ) => {
      const text = chars.join("");
      const byteChars = [...new TextEncoder().encode(text)].map((b) => noSplit.idToToken(b)!);
      assert.deepEqual(tokens(noSplit, noSplit.encode(text)), referenceBpe(byteChars, ranks));
    }),
    { numRuns: 300 },
  );
});

Deno.test("byte-level: decode(encode(s)) is the NFC form of s for any string", () => {
  fc.assert(
    fc.property(fc.string({ unit: "grapheme", maxLength: 60 }), (s) => {
      assert.equal(bl.decode(bl.encode(s)), s.normalize("NFC"));
      assert.equal(bl.decode(bl.encodeOrdinary(s)), s.normalize("NFC"));
    }),
    { numRuns: 300 },
  );
});

Deno.test("byte-level: the encoded ids decode token by token into the same bytes", () => {
  const text = "I'M here  123 é😀中文\n\n x<|im_end|>";
  const all = bl.encode(text).flatMap((id) => [...bl.tokenBytes(id)]);
  assert.deepEqual(all, [...new TextEncoder().encode(text)]);
});

Deno.test("sentencepiece: Prepend/Replace normalizer, merges by rank, Strip on decode", () => {
  assert.equal(sp.style, "sentencepiece");
  assert.deepEqual(tokens(sp, sp.encode("hello world")), ["▁hello", "▁world"]);
  assert.equal(sp.decode(sp.encode("hello world")), "hello world");
  assert.deepEqual(tokens(sp, sp.encode("中文")), ["▁", "中文"]);
  // "hel" merges first ("▁ h" 0, "e l" 1, "▁h el" 2) so "l o" (3) still applies to the second l.
  assert.deepEqual(tokens(sp, sp.encode("hello")), ["▁hello"]);
});

Deno.test("sentencepiece: byte fallback for characters outside the vocabulary", () => {
  assert.deepEqual(tokens(sp, sp.encode("é")), ["▁", "<0xC3>", "<0xA9>"]);
  assert.deepEqual(sp.tokenBytes(sp.tokenToId("<0xC3>")!), Uint8Array.of(0xc3));
  assert.deepEqual(sp.tokenBytes(sp.tokenToId("▁hello")!), new TextEncoder().encode(" hello"));
  for (const s of ["é", "😀 hello", "中文 and émoji 👍🏽", "a  b", "hello\nworld"]) {
    assert.equal(sp.decode(sp.encode(s)), s);
  }
});

Deno.test("sentencepiece: specials anywhere; encodeOrdinary keeps them as text", () => {
  const bos = sp.specialId("<s>")!;
  const eos = sp.specialId("</s>")!;
  assert.ok(sp.isSpecial(bos));
  const enc = sp.encode("<s>hello</s>");
  assert.equal(enc[0], bos);
  assert.equal(enc.at(-1), eos);
  assert.ok(!sp.encodeOrdinary("<s>hello</s>").includes(bos));
  assert.equal(sp.decode(sp.encodeOrdinary("<s>x</s>")), "<s>x</s>");
});

Deno.test("sentencepiece: unknown characters without byte fallback become one fused <unk>", () => {
  const noFallback = variant(spJson, (j) => {
    (j.model as Record<string, unknown>).byte_fallback = false;
  });
  assert.deepEqual(tokens(noFallback, noFallback.encode("héé")), ["▁h", "<unk>"]);
  const unfused = variant(spJson, (j) => {
    const m = j.model as Record<string, unknown>;
    m.byte_fallback = false;
    m.fuse_unk = false;
  });
  assert.deepEqual(tokens(unfused, unfused.encode("héé")), ["▁h", "<unk>", "<unk>"]);
});

Deno.test("sentencepiece: Metaspace pre-tokenizer with prepend_scheme first", () => {
  const meta = variant(spJson, (j) => {
    j.normalizer = null;
    j.pre_tokenizer = { type: "Metaspace", replacement: "▁", prepend_scheme: "first", split: true };
    j.decoder = { type: "Metaspace", replacement: "▁", prepend_scheme: "first", split: true };
  });
  assert.deepEqual(tokens(meta, meta.encode("hello world")), ["▁hello", "▁world"]);
  // "first": only the chunk at the start of the text gets the prefix, not one after a special token.
  assert.deepEqual(tokens(meta, meta.encode("<s>hello")), ["<s>", "h", "el", "lo"]);
  assert.equal(meta.decode(meta.encode("hello world")), "hello world");
});

Deno.test("invalid tokenizer.json names the field", () => {
  const cases: [(j: Record<string, unknown>) => void, RegExp][] = [
    [(j) => (j.model = { type: "Unigram", vocab: [] }), /"model.type" "Unigram" is not supported/],
    [
      (j) => ((j.model as Record<string, unknown>).merges = ["zz qq"]),
      /"model.merges\[0\]" "zz qq" uses a token missing/,
    ],
    [(j) => ((j.model as Record<string, unknown>).merges = [3]), /"model.merges\[0\]" must be/],
    [(j) => (j.added_tokens = [{ id: 1 }]), /"added_tokens\[0\]"/],
    [(j) => (j.pre_tokenizer = { type: "BertPreTokenizer" }), /pre-tokenizer type "BertPreTokenizer"/],
    [(j) => (j.normalizer = { type: "BertNormalizer" }), /normalizer type "BertNormalizer"/],
    [
      (j) => (j.pre_tokenizer = { type: "Split", pattern: { Regex: "(?<" }, behavior: "Isolated" }),
      /"pre_tokenizer": regex "\(\?<" is not supported/,
    ],
  ];
  for (const [edit, message] of cases) {
    assert.throws(
      () => variant(byteLevelJson, edit),
      (e: unknown) => e instanceof HfTokenizerError && message.test(e.message),
    );
  }
  assert.throws(() => HfTokenizer.fromJSON([]), HfTokenizerError);
});

Deno.test("encoding a 4 KB prompt is fast (per-word cache)", () => {
  const words = ["hello", "the", "world", "é", "中文", "aaaa", "<|im_start|>", "user\n", "123", "it's", "😀"];
  let text = "";
  for (let i = 0; text.length < 4096; i++) text += words[(i * 7) % words.length] + (i % 5 === 0 ? "\n" : " ");
  const t0 = performance.now();
  const out = bl.encode(text);
  const t1 = performance.now();
  assert.equal(bl.decode(out), text);
  // Generous bound for a shared 2-core CI box; typical is well under 10 ms.
  assert.ok(t1 - t0 < 250, `encode took ${(t1 - t0).toFixed(1)} ms`);
});

Deno.test("post-processor: withSpecialTokens puts the specials HF's add_special_tokens adds around one sequence", () => {
  // sentencepiece.json: TemplateProcessing single = <s> $A (Llama 2's BOS).
  const hello = sp.encode("hello");
  assert.deepEqual(sp.withSpecialTokens(hello), [sp.tokenToId("<s>")!, ...hello]);
  assert.deepEqual(sp.encode("hello"), hello, "encode itself adds nothing");
  // byte_level.json: a ByteLevel post-processor adds nothing.
  assert.deepEqual(bl.withSpecialTokens(bl.encode("hello")), bl.encode("hello"));
  // Llama 3's form: a Sequence of ByteLevel and a TemplateProcessing whose special_tokens entry gives the ids.
  const s = spJson.post_processor as Record<string, unknown>;
  const bos = sp.tokenToId("<s>")!;
  const eos = sp.tokenToId("</s>")!;
  const llama3 = variant(spJson, (j) => {
    j.post_processor = {
      type: "Sequence",
      processors: [{ type: "ByteLevel", add_prefix_space: true }, {
        ...s,
        single: [{ SpecialToken: { id: "BOS", type_id: 0 } }, { Sequence: { id: "A", type_id: 0 } }, {
          SpecialToken: { id: "</s>", type_id: 0 },
        }],
        special_tokens: { BOS: { id: "BOS", ids: [bos], tokens: ["<s>"] } },
      }],
    };
  });
  assert.deepEqual(llama3.withSpecialTokens([7]), [bos, 7, eos]);
  const bert = variant(spJson, (j) => {
    j.post_processor = { type: "BertProcessing", cls: ["<s>", bos], sep: ["</s>", eos] };
  });
  assert.deepEqual(bert.withSpecialTokens([7]), [bos, 7, eos]);
  for (
    const bad of [{ type: "Unknown" }, { type: "TemplateProcessing", single: [{ SpecialToken: { id: "<nope>" } }] }, {
      type: "BertProcessing",
      cls: "<s>",
    }]
  ) {
    assert.throws(() => variant(spJson, (j) => (j.post_processor = bad)), HfTokenizerError);
  }
});
