/**
 * The backend conformance suite on the native library's CPU device, as the factory makes it (`--backend native`),
 * on both bundled models, with fp32 weights (the golden logits are fp32) and with bf16 weights held.
 */
import { createBackend } from "../../engine/backends/create_backend.ts";
import { readModelDir } from "../../checkpoint/model_dir.ts";
import { backendConformance } from "./conformance.ts";

for (const name of ["rill-tiny-chatml", "rill-tiny-harmony"]) {
  const dir = new URL(`../../models/${name}`, import.meta.url).pathname;
  backendConformance(`native cpu, ${name}`, {
    modelDir: dir,
    create: async () =>
      await createBackend(await readModelDir(dir), {
        kind: "native",
        device: "cpu",
        maxNumSeqs: 16,
        maxModelLen: 1024,
      }),
  });
}

const CHATML = new URL("../../models/rill-tiny-chatml", import.meta.url).pathname;
backendConformance("native cpu, bf16 weights", {
  modelDir: CHATML,
  // bf16 weights move logits by about 1e-2; the suite's exact-match checks compare the backend with itself.
  logprobTolerance: 0.1,
  create: async () =>
    await createBackend(await readModelDir(CHATML), {
      kind: "native",
      device: "cpu",
      dtype: "bf16",
      maxNumSeqs: 16,
      maxModelLen: 1024,
    }),
});
