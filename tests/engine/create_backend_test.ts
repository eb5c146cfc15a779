import assert from "node:assert/strict";
import {
  BackendUnavailableError,
  createBackend,
  defaultMaxBatchTokens,
  describeBackend,
} from "../../engine/backends/create_backend.ts";
import type { HostSampledBackend } from "../../engine/backends/host_sampled_backend.ts";
import { readModelDir } from "../../checkpoint/model_dir.ts";
import { OnnxBackend } from "../../engine/backends/onnx_backend.ts";

const MODEL = new URL("../../models/rill-tiny-harmony", import.meta.url).pathname;
const CHECKPOINT = new URL("../fixtures/checkpoints/llama3-fp32", import.meta.url).pathname;
const EAGLE3_HEAD = new URL("../fixtures/eagle3/head-a", import.meta.url).pathname;

Deno.test("createBackend onnx: host-sampled ONNX sized from the engine's options", async () => {
  const m = await readModelDir(MODEL);
  const backend = await createBackend(m, { maxNumSeqs: 8, maxModelLen: 1000, maxDrafts: 3, cores: 2 });
  try {
    assert.deepEqual(backend.info, {
      vocabSize: 1024,
      maxPositions: 1024,
      sharesPrefixBlocks: true,
      blockSize: 16,
      numBlocks: 8 * 63,
      maxBatchTokens: defaultMaxBatchTokens(1024, 8, 3),
      maxSeqs: 8,
      maxDrafts: 3,
      maxTopLogprobs: 20,
    });
    assert.equal(defaultMaxBatchTokens(1024, 8, 3), 8192);
    assert.equal(defaultMaxBatchTokens(151_936, 32, 4), 512);
    // A 2M-parameter model: one 1-thread session for 8 sequences.
    assert.equal(describeBackend(backend), "1 ONNX session × 1 thread, host sampler, prefix cache");
    assert.ok((backend as HostSampledBackend).inner instanceof OnnxBackend);
  } finally {
    await backend.close();
  }
  const sized = await createBackend(m, {
    maxNumSeqs: 32,
    maxModelLen: 1024,
    blockSize: 32,
    numKvBlocks: 100,
    maxNumBatchedTokens: 300,
    shards: "auto",
    cores: 2,
  });
  try {
    const i = sized.info;
    assert.deepEqual([i.blockSize, i.numBlocks, i.maxBatchTokens], [32, 100, 300]);
    // Two sessions keep their prefix blocks in one shared pool, so they share them like one session.
    assert.equal(describeBackend(sized), "2 ONNX sessions × 1 thread, host sampler, prefix cache");
    assert.equal(i.sharesPrefixBlocks, true);
  } finally {
    await sized.close();
  }
  const unshared = await createBackend(m, { maxNumSeqs: 4, maxModelLen: 256, prefixCache: false });
  try {
    assert.equal(unshared.info.sharesPrefixBlocks, false);
  } finally {
    await unshared.close();
  }
});

Deno.test("createBackend refuses what it cannot do with a one-line BackendUnavailableError", async () => {
  const m = await readModelDir(MODEL);
  const base = { maxNumSeqs: 4, maxModelLen: 256 };
  const cases: [Parameters<typeof createBackend>[1], RegExp][] = [
    // No GPU is present where the tests run: the library refuses the device in one line, whether it was built with
    // nvcc (no driver / no GPU) or without (no CUDA device in the build).
    [{ ...base, kind: "native", device: "cuda" }, /^native backend: .*device cuda: /],
    [{ ...base, kind: "native", device: "cuda", dtype: "fp32" }, /^native backend: .*device cuda: /],
    [{ ...base, device: "cuda" }, /CPU only/],
    [{ ...base, dtype: "float16" }, /--dtype float16/],
    [{ ...base, draftModelDir: MODEL }, /--speculative draft needs --backend native/],
    [{ ...base, draftModelDir: EAGLE3_HEAD, draftKind: "eagle3" }, /--speculative eagle3 needs --backend native/],
    // The directory must hold what --speculative names.
    [{ ...base, kind: "native", draftModelDir: EAGLE3_HEAD }, /is an EAGLE-3 head; use --speculative eagle3/],
    [{ ...base, kind: "native", draftModelDir: MODEL, draftKind: "eagle3" }, /is not an EAGLE-3 head/],
    // A head for another target: the native library names the vocabulary.
    [
      { ...base, kind: "native", draftModelDir: EAGLE3_HEAD, draftKind: "eagle3" },
      /^native backend: eagle3 head .*vocab_size 96, the target's has 1024/,
    ],
    // A draft model must share the target's tokenizer: a 96-token checkpoint cannot draft for a 1024-token model.
    [{ ...base, kind: "native", draftModelDir: CHECKPOINT }, /vocabulary of 96 tokens, the target's has 1024/],
    [{ ...base, kind: "native", draftModelDir: "/nonexistent/draft" }, /draft model: .*nonexistent/],
  ];
  for (const [options, pattern] of cases) {
    await assert.rejects(
      createBackend(m, options),
      (e: unknown) => e instanceof BackendUnavailableError && pattern.test(e.message) && !e.message.includes("\n"),
    );
  }
});

Deno.test("createBackend native: device auto runs on the CPU where no GPU is usable, and honours its options", async () => {
  const m = await readModelDir(MODEL);
  const backend = await createBackend(m, {
    kind: "native",
    device: "auto",
    maxNumSeqs: 2,
    maxModelLen: 128,
    gpuMemoryFraction: 0.5,
    numKvBlocks: 24,
  });
  try {
    assert.match(describeBackend(backend), /^native cpu \(/);
    assert.equal(backend.info.numBlocks, 24);
  } finally {
    await backend.close();
  }
});
