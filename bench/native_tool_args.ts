const ROOT = new URL("../", import.meta.url).pathname;

/** The C compiler's arguments that build the bench program `source` (under ffi/bench/) into `out`, linked to build/ffi/librill.so. */
export function nativeToolArgs(source: string, out: string): string[] {
  return [
    "-std=c17",
    "-O2",
    "-Wall",
    "-Wextra",
    "-Werror",
    "-pthread",
    `-I${ROOT}ffi/include`,
    `${ROOT}ffi/bench/${source}`,
    `-L${ROOT}build/ffi`,
    "-lrill",
    `-Wl,-rpath,${ROOT}build/ffi`,
    "-o",
    out,
  ];
}
