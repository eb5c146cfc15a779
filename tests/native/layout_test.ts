/**
 * The binding's view of ffi/include/rill.h against the C compiler's: a program over the header prints every struct
 * offset and size, the ABI version and the element type of each `rill_step_batch` array, and the header's own text
 * gives the struct's field list. A field added to, removed from, reordered in or retyped in rill.h without the
 * TypeScript description (engine/sampling_fields.ts, engine/backends/step_batch_layout.ts) fails here.
 */
import assert from "node:assert/strict";
import { LAYOUT } from "../../engine/backends/native_backend.ts";
import { ABI_VERSION, openLibrary, signatureMismatch } from "../../ffi/binding/library.ts";
import { STEP_BATCH_ARRAYS, STEP_BATCH_COUNTS, stepBatchSignature } from "../../engine/backends/step_batch_layout.ts";
import { StepBatchBuilder } from "../../engine/step_batch_builder.ts";
import type { BackendInfo } from "../../engine/step_batch.ts";

const ROOT = new URL("../../", import.meta.url).pathname;
const HEADER = `${ROOT}ffi/include/rill.h`;

const STRUCTS = {
  stepBatch: "rill_step_batch",
  stepResult: "rill_step_result",
  options: "rill_options",
  info: "rill_info",
} as const;

/** The pointee types rill.h may give a batch array, by the binding's element-type names. */
const C_TYPES = {
  f32: "const float *",
  i32: "const int32_t *",
  u64: "const uint64_t *",
  u8: "const uint8_t *",
  u32: "const uint32_t *",
} as const;

/** The C program: one JSON object of sizes and offsets, the ABI version and the batch arrays' element types. */
function program(): string {
  const lines: string[] = [];
  const str = (s: string) => s.replaceAll('"', '\\"');
  for (const [key, cName] of Object.entries(STRUCTS)) {
    const fields = Object.keys(LAYOUT[key as keyof typeof LAYOUT]).filter((f) => f !== "size");
    const parts = [`"size":%zu`, ...fields.map((f) => `"${f}":%zu`)].join(",");
    const args = [`sizeof(${cName})`, ...fields.map((f) => `offsetof(${cName}, ${f})`)].join(", ");
    lines.push(`  printf("\\"${key}\\":{${str(parts)}},\\n", ${args});`);
  }
  const generic = Object.entries(C_TYPES).map(([name, type]) => `${type}: "${name}"`).join(", ");
  const types = STEP_BATCH_ARRAYS.map((a) =>
    `  printf("\\"${a.c}\\":\\"%s\\"${a === STEP_BATCH_ARRAYS.at(-1) ? "" : ","}", ` +
    `_Generic(((rill_step_batch){0}).${a.c}, ${generic}, default: "other"));`
  );
  return [
    "#include <stddef.h>",
    "#include <stdio.h>",
    '#include "rill.h"',
    "int main(void) {",
    '  printf("{\\n");',
    ...lines,
    '  printf("\\"abi\\":%d,\\n", RILL_ABI_VERSION);',
    '  printf("\\"types\\":{");',
    ...types,
    '  printf("}}\\n");',
    "  return 0;",
    "}",
    "",
  ].join("\n");
}

interface Compiled {
  readonly stepBatch: unknown;
  readonly stepResult: unknown;
  readonly options: unknown;
  readonly info: unknown;
  readonly abi: number;
  readonly types: Record<string, string>;
}

async function compileAndRun(): Promise<Compiled> {
  const dir = await Deno.makeTempDir({ prefix: "rill-layout-" });
  try {
    await Deno.writeTextFile(`${dir}/layout.c`, program());
    const cc = await new Deno.Command(Deno.env.get("CC") || "cc", {
      args: ["-std=c17", `-I${ROOT}ffi/include`, `${dir}/layout.c`, "-o", `${dir}/layout`],
      stderr: "piped",
    }).output();
    assert.equal(cc.code, 0, new TextDecoder().decode(cc.stderr));
    const run = await new Deno.Command(`${dir}/layout`, { stdout: "piped" }).output();
    assert.equal(run.code, 0);
    return JSON.parse(new TextDecoder().decode(run.stdout));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

/** The field names of `typedef struct <name> { … } <name>;` in the header's text, in order. */
function headerFields(header: string, name: string): string[] {
  const match = new RegExp(`typedef struct ${name} \\{([\\s\\S]*?)\\} ${name};`).exec(header);
  assert.ok(match, `rill.h has no struct ${name}`);
  const body = match[1]!.replace(/\/\*[\s\S]*?\*\//g, "");
  return body.split(";").map((d) => d.trim()).filter((d) => d !== "").map((d) => {
    const id = /([A-Za-z_][A-Za-z0-9_]*)\s*(\[[^\]]*\])?$/.exec(d);
    assert.ok(id, `cannot read the declaration "${d}" of ${name}`);
    return id[1]!;
  });
}

let compiledOnce: Promise<Compiled> | undefined;
/** The program's output, compiled by the first test that asks. */
const compiled = () => compiledOnce ??= compileAndRun();

Deno.test("native binding: struct offsets and sizes match ffi/include/rill.h", async () => {
  const { stepBatch, stepResult, options, info } = await compiled();
  assert.deepEqual({ stepBatch, stepResult, options, info }, JSON.parse(JSON.stringify(LAYOUT)));
});

Deno.test("native binding: the ABI version is rill.h's", async () => {
  assert.equal((await compiled()).abi, ABI_VERSION);
});

Deno.test("native binding: every struct's fields in rill.h are the binding's, in order", async () => {
  const header = await Deno.readTextFile(HEADER);
  for (const [key, cName] of Object.entries(STRUCTS)) {
    const layout: Record<string, number> = LAYOUT[key as keyof typeof STRUCTS];
    const ts = Object.keys(layout).filter((f) => f !== "size").sort((a, b) => layout[a]! - layout[b]!);
    assert.deepEqual(headerFields(header, cName), ts, cName);
  }
  assert.deepEqual(headerFields(header, "rill_step_batch"), [
    ...STEP_BATCH_COUNTS,
    ...STEP_BATCH_ARRAYS.map((a) => a.c),
  ]);
});

Deno.test("native binding: each batch array's element type is rill.h's and the StepBatch's typed array's", async () => {
  const { types } = await compiled();
  assert.deepEqual(types, Object.fromEntries(STEP_BATCH_ARRAYS.map((a) => [a.c, a.type])));
  const info: BackendInfo = {
    vocabSize: 64,
    maxPositions: 64,
    blockSize: 4,
    numBlocks: 16,
    maxBatchTokens: 8,
    maxSeqs: 2,
    maxDrafts: 2,
    maxTopLogprobs: 2,
    sharesPrefixBlocks: false,
    proposesDrafts: true,
    slidingWindow: 8,
    numSlidingBlocks: 16,
  };
  const batch = new StepBatchBuilder(info, 64).batch();
  const typedArrays = {
    f32: Float32Array,
    i32: Int32Array,
    u64: BigUint64Array,
    u8: Uint8Array,
    u32: Uint32Array,
  } as const;
  for (const a of STEP_BATCH_ARRAYS) {
    const array = a.get(batch);
    assert.ok(array instanceof typedArrays[a.type], `${a.name} is not a ${typedArrays[a.type].name}`);
  }
});

Deno.test("native binding: the built library's rill_step_batch signature is the binding's", async () => {
  const lib = await openLibrary(stepBatchSignature());
  const text = Deno.UnsafePointerView.getCString(lib.symbols.rill_step_batch_signature()!);
  assert.equal(text, stepBatchSignature());
  assert.equal(signatureMismatch(text, stepBatchSignature()), undefined);
});

Deno.test("native binding: a library laid out differently is named by its first differing field", () => {
  const own = stepBatchSignature();
  assert.match(signatureMismatch(own.replace("top_k:int32_t", "top_k:float"), own)!, /field \d+: library top_k:float/);
  assert.match(
    signatureMismatch(own.replace("min_p:float,", ""), own)!,
    /field \d+: library presence_penalty:float, binding min_p:float/,
  );
  assert.match(signatureMismatch(own + "extra:int32_t,", own)!, /library extra:int32_t, binding \(none\)/);
  assert.match(signatureMismatch(own.replace("bias_len,", ""), own)!, /count 5: library \(none\), binding bias_len/);
  assert.match(signatureMismatch("a;b;c", own)!, /unreadable/);
});
