/**
 * The native engine library's file and symbols over Deno FFI: where `deno task build:ffi` puts it, how a compiled
 * binary maps its embedded copy, and the checks made once on opening it (the ABI version, `rill_step_batch`'s layout).
 */
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { compiledRoot, isEmbedded } from "../../checkpoint/embedded_files.ts";
import { cString } from "./c_values.ts";

/**
 * The ABI version this binding speaks (RILL_ABI_VERSION in rill.h) for everything but `rill_step_batch`'s fields,
 * which `openLibrary` compares field by field through `rill_step_batch_signature`.
 */
export const ABI_VERSION = 4;

const SYMBOLS = {
  rill_abi_version: { parameters: [], result: "i32" },
  rill_step_batch_signature: { parameters: [], result: "pointer" },
  rill_engine_create: { parameters: ["buffer", "buffer", "buffer"], result: "i32" },
  rill_engine_destroy: { parameters: ["pointer"], result: "void" },
  rill_engine_info: { parameters: ["pointer", "buffer"], result: "i32" },
  rill_step: { parameters: ["pointer", "buffer", "buffer"], result: "i32", nonblocking: true },
  rill_release: { parameters: ["pointer", "i32"], result: "i32" },
  rill_forward_logits: { parameters: ["pointer", "buffer", "buffer"], result: "i32", nonblocking: true },
  rill_last_error: { parameters: ["pointer"], result: "pointer" },
  rill_global_error: { parameters: [], result: "pointer" },
} as const satisfies Deno.ForeignLibraryInterface;

export type Library = Deno.DynamicLibrary<typeof SYMBOLS>;

/** Where `deno task build:ffi` puts the library, relative to this file's checkout (or the compiled binary's mount). */
export const LIBRARY_PATH = resolve(dirname(fileURLToPath(import.meta.url)), "../../build/ffi/librill.so");

let library: Library | undefined;

/** Whether the library file exists (built here, or embedded in a compiled binary); opening it may still fail. */
export async function nativeLibraryBuilt(path: string = LIBRARY_PATH): Promise<boolean> {
  try {
    return (await Deno.stat(path)).isFile;
  } catch {
    return false;
  }
}

/**
 * A file native code can map for the library at `path`: `path` itself, or, when `path` lies in a `deno compile`
 * binary's embedded file system (`--include`), which only Deno's own file APIs can read, a temporary copy that
 * `cleanup` removes (once loaded the mapping outlives the file).
 */
export async function loadableLibraryFile(
  path: string,
  root: string | undefined = compiledRoot(),
): Promise<{ file: string; cleanup: () => Promise<void> }> {
  if (!isEmbedded(path, root)) return { file: path, cleanup: () => Promise.resolve() };
  const file = await Deno.makeTempFile({ prefix: "librill-", suffix: ".so" });
  await Deno.writeFile(file, await Deno.readFile(path));
  return { file, cleanup: () => Deno.remove(file).catch(() => {}) };
}

/**
 * Opens the library once per process and checks it speaks this binding's ABI and lays out `rill_step_batch` as
 * `stepBatchSignature` (the caller's layout, in `rill_step_batch_signature`'s text) says.
 */
export async function openLibrary(stepBatchSignature: string, path: string = LIBRARY_PATH): Promise<Library> {
  if (library !== undefined) return library;
  const { file, cleanup } = await loadableLibraryFile(path);
  try {
    library = Deno.dlopen(file, SYMBOLS);
  } catch (e) {
    const detail = e instanceof Error ? e.message : String(e);
    throw new Error(
      `cannot load the native engine library ${path} (run \`deno task build:ffi\`; it needs a C compiler): ${detail}`,
    );
  } finally {
    await cleanup();
  }
  const abi = library.symbols.rill_abi_version();
  if (abi !== ABI_VERSION) {
    library.close();
    library = undefined;
    throw new Error(`native engine library ${path} speaks ABI ${abi}, this binding ${ABI_VERSION}: rebuild it`);
  }
  const mismatch = signatureMismatch(cString(library.symbols.rill_step_batch_signature()), stepBatchSignature);
  if (mismatch !== undefined) {
    library.close();
    library = undefined;
    throw new Error(`native engine library ${path} lays out rill_step_batch differently (${mismatch}): rebuild it`);
  }
  return library;
}

/** The first difference between the library's signature and the binding's, in words; undefined when they agree. */
export function signatureMismatch(library: string, binding: string): string | undefined {
  const entries = (text: string) => text.split(";").map((part) => part.split(",").filter((e) => e !== ""));
  const [libCounts = [], libArrays = [], ...libRest] = entries(library);
  const [ownCounts = [], ownArrays = []] = entries(binding);
  if (libRest.length > 0) return `unreadable signature "${library.slice(0, 80)}"`;
  for (const [kind, lib, own] of [["count", libCounts, ownCounts], ["field", libArrays, ownArrays]] as const) {
    for (let k = 0; k < Math.max(lib.length, own.length); k++) {
      if (lib[k] === own[k]) continue;
      return `${kind} ${k}: library ${lib[k] ?? "(none)"}, binding ${own[k] ?? "(none)"}`;
    }
  }
  return undefined;
}

/** A status's name (rill.h's rill_status). */
export function statusName(status: number): string {
  return STATUS_NAMES[status] ?? `status ${status}`;
}

const STATUS_NAMES: Record<number, string> = {
  1: "invalid argument",
  2: "model error",
  3: "out of memory",
  4: "device error",
  5: "unsupported",
  6: "internal error",
};
