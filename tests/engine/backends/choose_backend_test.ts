import assert from "node:assert/strict";
import { backendCandidates } from "../../../engine/backends/choose_backend.ts";
import { BackendUnavailableError } from "../../../engine/backends/create_backend.ts";
import type { WeightFiles } from "../../../checkpoint/model_dir.ts";

const ONNX: WeightFiles = { onnxPath: "/m/onnx/model.onnx", safetensors: undefined };
const ST: WeightFiles = { onnxPath: undefined, safetensors: { paths: ["/m/model.safetensors"], bytes: 1 } };
const BOTH: WeightFiles = { onnxPath: ONNX.onnxPath, safetensors: ST.safetensors };
const NONE: WeightFiles = { onnxPath: undefined, safetensors: undefined };

const kinds = (w: WeightFiles, built: boolean) => backendCandidates("auto", "/m", w, built).map((c) => c.kind);

function refuses(fn: () => unknown, pattern: RegExp): void {
  assert.throws(
    fn,
    (e: unknown) => e instanceof BackendUnavailableError && pattern.test(e.message) && !e.message.includes("\n"),
  );
}

Deno.test("auto: native first on safetensors when the library is built, ONNX as the fallback the directory has", () => {
  assert.deepEqual(kinds(ST, true), ["native"]);
  assert.deepEqual(kinds(BOTH, true), ["native", "onnx"]);
  assert.deepEqual(kinds(BOTH, false), ["onnx"]);
  assert.deepEqual(kinds(ONNX, true), ["onnx"]);
  assert.deepEqual(kinds(ONNX, false), ["onnx"]);
  assert.match(backendCandidates("auto", "/m", BOTH, false)[0]!.why, /not built/);
  assert.match(backendCandidates("auto", "/m", ONNX, true)[0]!.why, /no safetensors/);
});

Deno.test("auto with nothing to serve, or a named backend without its weights, is one line naming the files", () => {
  refuses(() => kinds(NONE, true), /^\/m: no weights: model\.safetensors .* or onnx\/model\.onnx/);
  refuses(() => kinds(ST, false), /^\/m: the native library is not built .* no onnx\/model\.onnx/);
  refuses(
    () => backendCandidates("onnx", "/m", ST, true),
    /^\/m: onnx\/model\.onnx: file not found .*native backend serves/,
  );
  refuses(() => backendCandidates("native", "/m", ONNX, true), /^\/m: no model\.safetensors .*--backend native/);
  assert.deepEqual(backendCandidates("onnx", "/m", BOTH, true).map((c) => c.kind), ["onnx"]);
  assert.deepEqual(backendCandidates("native", "/m", BOTH, false).map((c) => c.kind), ["native"]);
});
