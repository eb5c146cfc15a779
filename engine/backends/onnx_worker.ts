/**
 * Worker side of WorkerBackend: hosts one OnnxBackend in a Web Worker so a second CPU core can run its own share
 * of the batch while the main thread runs another. Messages are handled strictly in order, so a release posted after
 * a step always applies after that step.
 */
import { type ModelDims, OnnxBackend, type OnnxBackendOptions } from "./onnx_backend.ts";
import type { StepBatch } from "../step_batch.ts";

export type WorkerRequest =
  | {
    readonly op: "init";
    /** A model file path, or the bytes of a self-contained model (copied into the worker). */
    readonly model: string | Uint8Array;
    readonly options: OnnxBackendOptions;
    readonly dims: Partial<ModelDims>;
  }
  | { readonly op: "step"; readonly batch: StepBatch }
  | { readonly op: "release"; readonly seqId: number }
  | { readonly op: "close" };

export type WorkerReply =
  | { readonly op: "ready"; readonly dims: ModelDims }
  | { readonly op: "logits"; readonly rows: Float32Array }
  | { readonly op: "closed" }
  | { readonly op: "error"; readonly message: string };

const scope = self as unknown as {
  onmessage: ((e: MessageEvent<WorkerRequest>) => void) | null;
  postMessage(message: WorkerReply, transfer?: Transferable[]): void;
};

let backend: OnnxBackend | undefined;
/** Deferred release errors are reported with the next reply so they are not lost. */
let deferredError: string | undefined;
let queue: Promise<void> = Promise.resolve();

async function handle(msg: WorkerRequest): Promise<void> {
  switch (msg.op) {
    case "init":
      backend = await OnnxBackend.create(msg.model, msg.options, msg.dims);
      scope.postMessage({ op: "ready", dims: backend.dims });
      return;
    case "step": {
      if (deferredError !== undefined) {
        const message = deferredError;
        deferredError = undefined;
        throw new Error(message);
      }
      // Copied out of the backend's reused buffer into one that is transferred without copying again.
      const rows = (await backend!.forward(msg.batch)).slice();
      scope.postMessage({ op: "logits", rows }, [rows.buffer]);
      return;
    }
    case "release":
      backend!.release(msg.seqId);
      return;
    case "close":
      await backend?.close();
      scope.postMessage({ op: "closed" });
      return;
    default: {
      const never: never = msg;
      throw new Error(`unknown message ${JSON.stringify(never)}`);
    }
  }
}

scope.onmessage = (e) => {
  const msg = e.data;
  queue = queue.then(() => handle(msg)).catch((err) => {
    const message = err instanceof Error ? err.message : String(err);
    if (msg.op === "release") deferredError = message;
    else scope.postMessage({ op: "error", message });
  });
};
