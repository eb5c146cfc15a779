/**
 * The backend conformance suite on ONNX Runtime behind the host sampler: one session as the factory makes it, and
 * two shards (main thread + worker) placing sequences alternately, so every check crosses the worker too: with one
 * shared block pool (a sequence on one shard starts from prefix blocks the other computed), and with none (each
 * refuses blocks it did not compute).
 */
import { createBackend, MAX_TOP_LOGPROBS, onnxDims } from "../../engine/backends/create_backend.ts";
import { HostSampledBackend } from "../../engine/backends/host_sampled_backend.ts";
import { readModelDir } from "../../checkpoint/model_dir.ts";
import { OnnxBackend } from "../../engine/backends/onnx_backend.ts";
import { ShardedBackend, WorkerBackend } from "../../engine/backends/worker_backend.ts";
import { createBlockPool } from "../../engine/backends/block_pool.ts";
import { backendConformance } from "./conformance.ts";

const MODEL = new URL("../../models/rill-tiny-chatml", import.meta.url).pathname;

backendConformance("onnx", {
  modelDir: MODEL,
  create: async () => await createBackend(await readModelDir(MODEL), { maxNumSeqs: 16, maxModelLen: 1024 }),
});

for (const shared of [true, false]) {
  backendConformance(`onnx, 2 shards${shared ? ", shared prefix blocks" : ""}`, {
    modelDir: MODEL,
    create: async () => {
      const m = await readModelDir(MODEL);
      const dims = onnxDims(m.config);
      const options = shared ? { prefixPool: createBlockPool({ blockSize: 16, numBlocks: 1024, ...dims }) } : {};
      const main = await OnnxBackend.create(m.weights.onnxPath!, options, dims);
      const worker = await WorkerBackend.create(m.weights.onnxPath!, options, dims);
      return new HostSampledBackend(new ShardedBackend([main, worker], { mainFirst: 1 }), {
        blockSize: 16,
        numBlocks: 1024,
        maxBatchTokens: 4096,
        maxSeqs: 16,
        maxDrafts: 4,
        maxTopLogprobs: MAX_TOP_LOGPROBS,
      });
    },
  });
}
