/**
 * Which backend serves a model directory (`--backend auto|onnx|native`). `auto` prefers the native library on
 * safetensors weights and falls back to the ONNX graph when the directory has one: when the library is not built (no
 * C compiler at build time), or when it refuses the checkpoint (an architecture only the ONNX export covers).
 * A named backend is the only candidate, and a directory without its weights is a one-line error naming them.
 */
import type { WeightFiles } from "../../checkpoint/model_dir.ts";
import { type BackendKind, BackendUnavailableError } from "./create_backend.ts";

export type BackendRequest = "auto" | BackendKind;

/** One backend to try, and the reason it was chosen (for the start-up log). */
export interface BackendCandidate {
  readonly kind: BackendKind;
  readonly why: string;
}

const SAFETENSORS_NAMES = "model.safetensors (or model.safetensors.index.json and its shards)";

/** The backends to try in order; the first that opens serves. Never empty: a hopeless request throws. */
export function backendCandidates(
  request: BackendRequest,
  dir: string,
  weights: WeightFiles,
  nativeBuilt: boolean,
): BackendCandidate[] {
  const safetensors = weights.safetensors !== undefined;
  const onnx = weights.onnxPath !== undefined;
  switch (request) {
    case "onnx":
      if (!onnx) {
        throw new BackendUnavailableError(
          `${dir}: onnx/model.onnx: file not found (--backend onnx runs an ONNX export` +
            (safetensors ? "; without the flag the native backend serves the safetensors weights)" : ")"),
        );
      }
      return [{ kind: "onnx", why: "--backend onnx" }];
    case "native":
      if (!safetensors) {
        throw new BackendUnavailableError(
          `${dir}: no ${SAFETENSORS_NAMES}: --backend native reads safetensors weights`,
        );
      }
      return [{ kind: "native", why: "--backend native" }];
    case "auto": {
      const out: BackendCandidate[] = [];
      if (safetensors && nativeBuilt) out.push({ kind: "native", why: "safetensors weights and the native library" });
      if (onnx) {
        out.push({
          kind: "onnx",
          why: !safetensors
            ? "onnx/model.onnx and no safetensors weights"
            : nativeBuilt
            ? "the native library cannot serve this checkpoint"
            : "the native library is not built (`deno task build:ffi` needs a C compiler)",
        });
      }
      if (out.length > 0) return out;
      throw new BackendUnavailableError(
        safetensors
          ? `${dir}: the native library is not built (\`deno task build:ffi\` needs a C compiler) and there is no ` +
            `onnx/model.onnx for the ONNX backend`
          : `${dir}: no weights: ${SAFETENSORS_NAMES} for the native backend, or onnx/model.onnx for the ONNX backend`,
      );
    }
    default: {
      const never: never = request;
      throw new BackendUnavailableError(`unknown backend ${String(never)}`);
    }
  }
}
