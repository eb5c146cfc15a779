/**
 * scripts/gpu_check.py drives the library over Python ctypes on GPU machines, where a stale struct would cost device
 * time: its mirrors of rill.h must have the offsets and sizes the binding holds (which tests/native/layout_test.ts
 * checks against the C compiler), its ABI version the library's, and its `rill_step_batch` (built from the library's
 * own signature) every field the library lists, at the binding's offsets. Needs only Python's standard library.
 */
import assert from "node:assert/strict";
import { LAYOUT } from "../../engine/backends/native_backend.ts";
import { LIBRARY_PATH } from "../../ffi/binding/library.ts";

const ROOT = new URL("../../", import.meta.url).pathname;

const PROBE = `
import ctypes as C, json, sys
sys.path.insert(0, sys.argv[1] + "scripts")
import gpu_check as g
g.load_library(sys.argv[2])
def layout(t):
    return {"size": C.sizeof(t), **{name: getattr(t, name).offset for name, _ in t._fields_}}
print(json.dumps({"options": layout(g.Options), "info": layout(g.Info), "stepResult": layout(g.StepResult),
                  "stepBatch": layout(g.StepBatch)}))
`;

Deno.test("gpu_check.py's ctypes structs are rill.h's: ABI version, every offset and size", async () => {
  const { code, stdout, stderr } = await new Deno.Command("/usr/bin/python3", {
    args: ["-c", PROBE, ROOT, LIBRARY_PATH],
    stdout: "piped",
    stderr: "piped",
  }).output();
  const err = new TextDecoder().decode(stderr);
  assert.equal(code, 0, `gpu_check.py failed to load the library: ${err}`);
  const got = JSON.parse(new TextDecoder().decode(stdout)) as Record<keyof typeof LAYOUT, Record<string, number>>;
  for (const name of ["options", "info", "stepResult", "stepBatch"] as const) {
    assert.deepEqual(got[name], { ...LAYOUT[name] }, `${name}: gpu_check.py's layout differs from rill.h's`);
  }
});
