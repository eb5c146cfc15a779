import assert from "node:assert/strict";
import { o200kTokenizer } from "../../testing/o200k_tokenizer.ts";

const tok = o200kTokenizer();

Deno.test("O200kTokenizer encodes plain text like o200k_base", () => {
  assert.deepEqual(tok.encode("hello world"), [24912, 2375]);
});

Deno.test("O200kTokenizer encode recognises specials anywhere in the text", () => {
  assert.deepEqual(tok.encode("<|start|>assistant<|channel|>final<|message|>Hello, world!<|return|>"), [
    200006,
    173781,
    200005,
    17196,
    200008,
    13225,
    11,
    2375,
    0,
    200002,
  ]);
  assert.deepEqual(tok.encode("hi<|endoftext|>"), [...tok.encodeOrdinary("hi"), 199999]);
  assert.deepEqual(tok.encodeOrdinary("hi"), [3686]);
  assert.deepEqual(tok.encode("<|end|><|start|>"), [200007, 200006]);
});

Deno.test("O200kTokenizer encodeOrdinary never produces specials", () => {
  assert.deepEqual(tok.encodeOrdinary("<|start|>"), [27, 91, 5236, 91, 29]);
});

Deno.test("O200kTokenizer looks specials up by text and flags them", () => {
  assert.equal(tok.specialId("<|start|>"), 200006);
  assert.equal(tok.specialId("<|constrain|>"), 200003);
  assert.equal(tok.specialId("<|reserved_200013|>"), 200013);
  assert.equal(tok.specialId("<|endofprompt|>"), 200018);
  assert.equal(tok.specialId("start"), undefined);
  assert.ok(tok.isSpecial(200012));
  assert.ok(!tok.isSpecial(173781));
  assert.equal(tok.vocabSize, 201088);
});

Deno.test("O200kTokenizer tokenBytes gives raw bytes, including partial UTF-8", () => {
  assert.deepEqual([...tok.tokenBytes(9552)], [0x20, 0xf0, 0x9f]);
  assert.deepEqual([...tok.tokenBytes(74580)], [0x20, 0xf0, 0x9f, 0x92]);
  assert.deepEqual([...tok.tokenBytes(244)], [0x96]);
  assert.deepEqual(new TextDecoder().decode(tok.tokenBytes(200006)), "<|start|>");
  assert.equal(tok.decode([40, 74580, 244, 480]), "I 💖 it");
});

Deno.test("O200kTokenizer reproduces the harmony.md §1.11 prompt tail", () => {
  const text = "<|start|>user<|message|>Weather in Tokyo?<|end|><|start|>assistant";
  assert.deepEqual(tok.encode(text), [200006, 1428, 200008, 29602, 306, 40510, 30, 200007, 200006, 173781]);
  assert.equal(tok.decode(tok.encode(text)), text);
});
