import { join } from "node:path";
import { exists } from "./exists.ts";

const ROOT = new URL("../", import.meta.url).pathname;

/**
 * Builds build/ffi/librill.so (its output shown); whether the library is there afterwards. The build
 * (scripts/build_ffi.ts) runs as its own process: the bench layer does not import scripts/.
 */
export async function buildNativeLibrary(): Promise<boolean> {
  const build = await new Deno.Command(Deno.execPath(), {
    args: ["run", "--allow-run", "--allow-read", "--allow-write", "--allow-env", join(ROOT, "scripts/build_ffi.ts")],
    stdout: "inherit",
    stderr: "inherit",
  }).output();
  return build.success && await exists(join(ROOT, "build/ffi/librill.so"));
}
