/**
 * Files embedded in a `deno compile` binary: Deno serves them from a read-only file system that its own APIs see but
 * native code (onnxruntime, dlopen) does not, so whatever native code must open is copied out first.
 */
import { resolve } from "node:path";
import { fileURLToPath } from "node:url";

/**
 * The root of the embedded file system when this program runs as a `deno compile` binary, else undefined. Deno
 * mounts it at `<temp dir>/deno-compile-<binary name>/`, and the main module lives inside it.
 */
export function compiledRoot(
  mainModule: string = Deno.mainModule,
  execPath: string = Deno.execPath(),
): string | undefined {
  if (!mainModule.startsWith("file:")) return undefined;
  const exe = execPath.split(/[\\/]/).pop() ?? "";
  const path = fileURLToPath(mainModule);
  const marker = `/deno-compile-${exe}/`;
  const at = path.indexOf(marker);
  return at < 0 ? undefined : path.slice(0, at + marker.length - 1);
}

/** Whether `path` lies inside the embedded file system rooted at `root`. */
export function isEmbedded(path: string, root: string | undefined = compiledRoot()): boolean {
  if (root === undefined) return false;
  const absolute = resolve(path);
  return absolute === root || absolute.startsWith(`${root}/`);
}
