/**
 * The CUDA device where the tests run: no GPU. These tests check the build and the refusal, never the GPU itself
 * (scripts/gpu_check.py does that on a GPU machine).
 */
import assert from "node:assert/strict";
import { NativeBackend } from "../../engine/backends/native_backend.ts";

const ROOT = new URL("../../", import.meta.url).pathname;
const MODEL = `${ROOT}models/rill-tiny-chatml`;

async function nvccPresent(): Promise<boolean> {
  try {
    const { success } = await new Deno.Command(Deno.env.get("NVCC") || "nvcc", {
      args: ["--version"],
      stdout: "null",
      stderr: "null",
    }).output();
    return success;
  } catch {
    return false;
  }
}

async function gpuPresent(): Promise<boolean> {
  try {
    const { success } = await new Deno.Command("nvidia-smi", { args: ["-L"], stdout: "null", stderr: "null" })
      .output();
    return success;
  } catch {
    return false;
  }
}

Deno.test("native: device cuda without a usable GPU is refused in one line naming the reason", async () => {
  if (await gpuPresent()) return; // a GPU machine runs scripts/gpu_check.py instead
  const error = await NativeBackend.create(MODEL, { device: "cuda", threads: 1, maxSeqs: 2, numBlocks: 8 }).then(
    () => undefined,
    (e: unknown) => e,
  );
  assert.ok(error instanceof Error, "device cuda must fail without a GPU");
  assert.doesNotMatch(error.message, /\n/);
  // Built with nvcc, the library holds the CUDA device and says why it cannot run; built without, it says so.
  const expected = await nvccPresent() ? /device cuda: no usable GPU \(.+\)/ : /device cuda: .*built without CUDA/;
  assert.match(error.message, expected);
});

Deno.test("native: device auto without a usable GPU runs on the CPU", async () => {
  if (await gpuPresent()) return;
  const backend = await NativeBackend.create(MODEL, { device: "auto", threads: 1, maxSeqs: 2, numBlocks: 8 });
  try {
    assert.equal(backend.info.device, "cpu");
  } finally {
    await backend.close();
  }
});
