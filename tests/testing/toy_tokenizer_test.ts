import assert from "node:assert/strict";
import { TOY_SPECIALS, ToyTokenizer } from "../../testing/toy_tokenizer.ts";

const tok = new ToyTokenizer();

Deno.test("toy tokenizer: encode/decode round-trips text with specials and multi-byte characters", () => {
  const text = "<|start|>assistant<|channel|>final<|message|>Hello world é€😀 <think>x</think><|end|>";
  const ids = tok.encode(text);
  assert.equal(tok.decode(ids), text);
  assert.ok(ids.includes(tok.specialId("<|start|>")!));
});

Deno.test("toy tokenizer: specials are control tokens found by text; plain bytes are not special", () => {
  for (const s of TOY_SPECIALS) {
    const id = tok.specialId(s);
    assert.ok(id !== undefined, s);
    assert.ok(tok.isSpecial(id));
    assert.equal(new TextDecoder().decode(tok.tokenBytes(id)), s);
  }
  assert.equal(tok.isSpecial(65), false);
  assert.equal(tok.specialId("<|nope|>"), undefined);
});

Deno.test("toy tokenizer: encodeOrdinary never yields specials", () => {
  const ids = tok.encodeOrdinary("<|end|><think>");
  assert.ok(ids.every((id) => !tok.isSpecial(id)));
  assert.equal(tok.decode(ids), "<|end|><think>");
});

Deno.test("toy tokenizer: some tokens hold partial UTF-8, so characters split across tokens", () => {
  const tail = [...Array(tok.vocabSize).keys()].find((id) => {
    const b = tok.tokenBytes(id);
    return b.length === 2 && b[0] === 0xa9 && b[1] === 0x20;
  });
  assert.ok(tail !== undefined);
  assert.throws(() => new TextDecoder("utf-8", { fatal: true }).decode(tok.tokenBytes(tail)));
  assert.equal(tok.decode([0xc3, tail]), "\u00e9 ");
});
