/**
 * Builds rill's native engine library (ffi/) with the system C compiler:
 *
 * - `build/ffi/librill.so` from every `.c` under `ffi/src` (the engine: config, checkpoints, validation, sampling, the
 *   forward pass over the device interface) and `ffi/devices/cpu` (the CPU device), one object per source under
 *   `build/ffi/obj/`, so an edit recompiles only what it touches (a header edit recompiles everything);
 * - with `--tests`, the C test programs `ffi/tests/*.c`, each linked with AddressSanitizer/UBSan builds of the same
 *   sources, into `build/ffi/tests/<name>` (scripts/test.ts runs them);
 * - the CUDA device (`ffi/devices/cuda`): its `.c` sources always (they need no CUDA headers), and with nvcc on PATH
 *   (or `NVCC`) every `.cu` into `build/ffi/cuda_obj/` with machine code for
 *   sm_80, sm_89 and sm_90a plus compute_90 PTX, linked into the same library with the static CUDA runtime (so the
 *   library needs only the driver at run time, and `deno task compile` still embeds one file); without nvcc,
 *   `ffi/devices/cuda/no_cuda.c` takes its place and the library refuses `device cuda` in one line. The sanitized tests
 *   always link `no_cuda.c`: they check the CPU device.
 * - with `--tests` and a C++ compiler, `test_cuda_emu_<part>`: the CUDA sources on a host emulation of CUDA
 *   (`ffi/tests/cuda_emu/`, test support) with their checks (`ffi/tests/cuda/`), no nvcc or GPU needed.
 *
 * Nothing is rebuilt while its outputs are newer than every source and header and their stamp (compiler, flags,
 * source list) is unchanged. Without a C compiler it prints one warning and exits 0: the ONNX backend still works.
 * `CC` picks another compiler.
 */
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const SRC = join(ROOT, "ffi/src");
/** The devices, each in its folder; sources include another device folder's headers as `cpu/…`, `cuda/…`. */
const DEVICES = join(ROOT, "ffi/devices");
const CPU_DEVICE = join(DEVICES, "cpu");
const INCLUDE = join(ROOT, "ffi/include");
const TESTS = join(ROOT, "ffi/tests");
const CUDA = join(DEVICES, "cuda");
const OUT = join(ROOT, "build/ffi");
export const LIBRARY_PATH = join(OUT, "librill.so");

const COMMON = ["-std=c17", "-Wall", "-Wextra", "-Werror", "-pthread", `-I${INCLUDE}`, `-I${SRC}`, `-I${DEVICES}`];
// Only RILL_API functions (ffi/include/rill.h) are exported from the library.
const LIB_FLAGS = [...COMMON, "-O2", "-fPIC", "-fvisibility=hidden"];
const SAN_FLAGS = [
  ...COMMON,
  "-O1",
  "-g",
  "-fsanitize=address,undefined",
  "-fno-sanitize-recover=undefined",
  "-fno-omit-frame-pointer",
];
const LIBS = ["-lm", "-lpthread"];
const NO_CUDA = join(CUDA, "no_cuda.c");
/** Warnings are errors here too; 90a machine code runs only on Hopper, so compute_90 PTX covers newer GPUs. */
const NVCC_FLAGS = [
  "-std=c++17",
  "-O3",
  "-Xcompiler",
  "-fPIC,-fvisibility=hidden,-Wall,-Wextra,-Werror",
  "--Werror",
  "all-warnings",
  `-I${INCLUDE}`,
  `-I${SRC}`,
  `-I${DEVICES}`,
  "-gencode",
  "arch=compute_80,code=sm_80",
  "-gencode",
  "arch=compute_89,code=sm_89",
  "-gencode",
  "arch=compute_90a,code=sm_90a",
  "-gencode",
  "arch=compute_90,code=compute_90",
];
const CUDA_LIBS = ["-cudart", "static", "-ldl", "-lrt"];
/** The host emulation of CUDA (test support: cuda_runtime.h, cuda_bf16.h, the fiber scheduler cuda_emu.cpp). */
const EMU = join(TESTS, "cuda_emu");
/** The CUDA device's checks on the emulation: test_cuda_emu.cpp and the parts it includes or links. */
const EMU_CHECKS = join(TESTS, "cuda");
/** The parts test_cuda_emu's checks come in (its main names them). */
const EMU_PARTS = ["kernels", "models", "engine", "eagle3", "ops"] as const;
const EMU_FLAGS = [
  "-std=c++17",
  "-O2",
  "-g",
  "-Wall",
  "-Wextra",
  "-Werror",
  "-Wno-unknown-pragmas", // the kernels' #pragma unroll
  "-fno-strict-aliasing", // the kernels reinterpret 16-byte loads as bf16 pairs
  "-U_FORTIFY_SOURCE", // the fibers _longjmp between stacks, which the fortified longjmp refuses
  "-DRILL_CUDA_EMU",
  `-I${EMU}`,
  `-I${INCLUDE}`,
  `-I${SRC}`,
  `-I${DEVICES}`,
];

/**
 * What a set of outputs was built with, kept next to them (`build/ffi/<name>.stamp.json`): when it differs, every
 * output of the set is rebuilt. The library and the sanitized tests have a stamp each, so building one set never
 * marks the other as current.
 */
class Stamp {
  readonly #path: string;
  readonly #text: string;
  changed = true;

  private constructor(path: string, text: string) {
    this.#path = path;
    this.#text = text;
  }

  static async read(name: string, contents: unknown): Promise<Stamp> {
    const stamp = new Stamp(join(OUT, `${name}.stamp.json`), JSON.stringify(contents, null, 2));
    try {
      stamp.changed = (await Deno.readTextFile(stamp.#path)) !== stamp.#text;
    } catch (e) {
      if (!(e instanceof Deno.errors.NotFound)) throw e;
    }
    return stamp;
  }

  /** Records the set as built; call only after every output of the set is written. */
  async write(): Promise<void> {
    if (!this.changed) return;
    await Deno.mkdir(OUT, { recursive: true });
    await Deno.writeTextFile(this.#path, this.#text);
    this.changed = false;
  }
}

async function run(cmd: string, args: readonly string[]): Promise<{ ok: boolean; output: string }> {
  try {
    const { code, stdout, stderr } = await new Deno.Command(cmd, { args: [...args], stdout: "piped", stderr: "piped" })
      .output();
    const dec = new TextDecoder();
    return { ok: code === 0, output: dec.decode(stdout) + dec.decode(stderr) };
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return { ok: false, output: `${cmd}: not found` };
    throw e;
  }
}

async function walk(dir: string, ext: string, recursive: boolean): Promise<string[]> {
  const found: string[] = [];
  try {
    for await (const entry of Deno.readDir(dir)) {
      const path = join(dir, entry.name);
      if (entry.isDirectory && recursive) found.push(...await walk(path, ext, true));
      else if (entry.isFile && entry.name.endsWith(ext)) found.push(path);
    }
  } catch (e) {
    if (!(e instanceof Deno.errors.NotFound)) throw e;
  }
  return found.sort();
}

async function mtime(path: string): Promise<number> {
  try {
    return (await Deno.stat(path)).mtime?.getTime() ?? 0;
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return -1;
    throw e;
  }
}

/** Runs `jobs` with at most `limit` at a time; the first failure is rethrown after all have settled. */
async function parallel(jobs: readonly (() => Promise<void>)[], limit: number): Promise<void> {
  let next = 0;
  const errors: unknown[] = [];
  const worker = async () => {
    while (next < jobs.length) {
      const job = jobs[next++]!;
      try {
        await job();
      } catch (e) {
        errors.push(e);
      }
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(limit, jobs.length)) }, worker));
  if (errors.length > 0) throw errors[0];
}

class BuildError extends Error {}

async function compile(cc: string, flags: readonly string[], source: string, object: string): Promise<void> {
  await Deno.mkdir(dirname(object), { recursive: true });
  const tmp = `${object}.${Deno.pid}.tmp`; // per process: builds in one checkout may overlap
  const result = await run(cc, [...flags, "-c", source, "-o", tmp]);
  if (!result.ok) throw new BuildError(`${relative(ROOT, source)}:\n${result.output}`);
  await Deno.rename(tmp, object);
}

/** Links into `output` through a temporary file, so a reader never sees a half-written library. */
async function link(cc: string, args: readonly string[], output: string, libs = LIBS): Promise<void> {
  await Deno.mkdir(dirname(output), { recursive: true });
  const tmp = `${output}.${Deno.pid}.tmp`;
  const result = await run(cc, [...args, "-o", tmp, ...libs]);
  if (!result.ok) throw new BuildError(`linking ${relative(ROOT, output)}:\n${result.output}`);
  await Deno.rename(tmp, output);
}

/** Compiles the stale objects of `sources` under `objDir`; returns the objects and whether any was rebuilt. */
async function objects(
  cc: string,
  flags: readonly string[],
  sources: readonly string[],
  objDir: string,
  newestInput: number,
  force: boolean,
  parallelism = navigator.hardwareConcurrency || 2,
): Promise<{ objects: string[]; rebuilt: boolean }> {
  const jobs: (() => Promise<void>)[] = [];
  const objs: string[] = [];
  for (const source of sources) {
    // Named by the path under ffi/ (src/engine.o, devices/cpu/moe.o): no two objects share a name.
    const base = dirname(SRC);
    const object = join(objDir, relative(base, source).replace(/\.(c|cu)$/, ".o"));
    objs.push(object);
    const built = await mtime(object);
    if (force || built < 0 || built < newestInput || built < await mtime(source)) {
      jobs.push(() => compile(cc, flags, source, object));
    }
  }
  await parallel(jobs, parallelism);
  return { objects: objs, rebuilt: jobs.length > 0 };
}

/**
 * The CUDA device checked without a GPU: its .cu sources compiled as C++ for the host emulation (ffi/tests/cuda_emu;
 * needs no nvcc), with the checks of ffi/tests/cuda, and linked with the CPU device's objects into
 * `build/ffi/emu_obj/test_cuda_emu`, then linked into `build/ffi/tests/` once per part (not sanitized: the emulation's
 * fibers switch stacks, which AddressSanitizer cannot follow). Without a C++ compiler it is skipped with a warning.
 */
async function buildEmulationTest(
  cpuObjects: readonly string[],
  testDir: string,
  log: (line: string) => void,
): Promise<string[]> {
  const cxx = Deno.env.get("CXX") || "c++";
  if (!(await run(cxx, ["--version"])).ok) {
    log(`warning: no C++ compiler (${cxx}); the CUDA emulation test is not built`);
    return [];
  }
  const exe = join(OUT, "emu_obj", "test_cuda_emu");
  const sources = [
    ...await walk(CUDA, ".cu", false),
    ...await walk(EMU, ".cpp", false),
    ...await walk(EMU_CHECKS, ".cpp", false),
  ];
  const headers = [
    ...await walk(CUDA, ".cuh", false),
    ...await walk(EMU, ".h", false),
    ...await walk(EMU_CHECKS, ".h", false),
    ...await walk(SRC, ".h", true),
    ...await walk(DEVICES, ".h", true),
    ...await walk(INCLUDE, ".h", false),
    ...await walk(TESTS, ".h", false),
  ];
  let newestHeader = 0;
  for (const h of headers) newestHeader = Math.max(newestHeader, await mtime(h));
  const objDir = join(OUT, "emu_obj");
  const jobs: (() => Promise<void>)[] = [];
  const objs: string[] = [];
  for (const source of sources) {
    // Named by the path under ffi/ (devices/cuda/sample.o, tests/cuda/test_cuda_emu.o): no two share an object.
    const object = join(objDir, relative(dirname(SRC), source).replace(/\.(cu|cpp)$/, ".o"));
    objs.push(object);
    const built = await mtime(object);
    if (built < 0 || built < newestHeader || built < await mtime(source)) {
      jobs.push(() => compile(cxx, [...EMU_FLAGS, "-x", "c++"], source, object));
    }
  }
  await parallel(jobs, navigator.hardwareConcurrency || 2);
  let newestInput = 0;
  for (const o of [...objs, ...cpuObjects]) newestInput = Math.max(newestInput, await mtime(o));
  if (await mtime(exe) < newestInput) {
    await link(cxx, [...objs, ...cpuObjects], exe);
    log(`built ${relative(ROOT, exe)} (the CUDA device on the host emulation)`);
  }
  // One program per part (the program picks its part from its own name), so the suite runs them side by side, each
  // well inside the per-program time limit. Hard links: one executable, no extra link step.
  const parts: string[] = [];
  await Deno.remove(join(testDir, "test_cuda_emu")).catch(() => {}); // a whole-program build from before the parts
  for (const part of EMU_PARTS) {
    const name = join(testDir, `test_cuda_emu_${part}`);
    await Deno.remove(name).catch(() => {});
    await Deno.link(exe, name);
    parts.push(name);
  }
  return parts;
}

export interface BuildResult {
  /** False when no C compiler is present (nothing was built). */
  readonly built: boolean;
  readonly library: string;
  readonly tests: readonly string[];
}

export async function buildFfi(options: { tests: boolean; log?: (line: string) => void }): Promise<BuildResult> {
  const log = options.log ?? ((line: string) => console.error(line));
  const cc = Deno.env.get("CC") || "cc";
  const version = await run(cc, ["--version"]);
  if (!version.ok) {
    log(`warning: no C compiler (${cc}); the native engine library is not built (the ONNX backend still works)`);
    return { built: false, library: LIBRARY_PATH, tests: [] };
  }

  // Every C source but no_cuda.c, which stands in for the .cu sources when nvcc is absent.
  const cpuSources = [
    ...await walk(SRC, ".c", true),
    ...await walk(CPU_DEVICE, ".c", true),
    ...(await walk(CUDA, ".c", false)).filter((s) => s !== NO_CUDA),
  ];
  const sources = [...cpuSources, NO_CUDA];
  const headers = [
    ...await walk(SRC, ".h", true),
    ...await walk(DEVICES, ".h", true),
    ...await walk(INCLUDE, ".h", true),
  ];
  const compiler = version.output.split("\n")[0] ?? "";
  const sourceList = sources.map((s) => relative(ROOT, s));
  const nvcc = Deno.env.get("NVCC") || "nvcc";
  const nvccVersion = await run(nvcc, ["--version"]);
  const cudaSources = nvccVersion.ok ? await walk(CUDA, ".cu", false) : [];
  const libSources = nvccVersion.ok ? cpuSources : sources;
  const libStamp = await Stamp.read("library", {
    compiler,
    flags: LIB_FLAGS,
    sources: libSources.map((s) => relative(ROOT, s)),
    ...(nvccVersion.ok
      ? {
        nvcc: nvccVersion.output.trim().split("\n").at(-1) ?? "",
        nvccFlags: NVCC_FLAGS,
        cudaSources: cudaSources.map((s) => relative(ROOT, s)),
      }
      : {}),
  });
  let newestHeader = 0;
  for (const h of headers) newestHeader = Math.max(newestHeader, await mtime(h));
  let newestCudaHeader = newestHeader;
  for (const h of await walk(CUDA, ".cuh", false)) newestCudaHeader = Math.max(newestCudaHeader, await mtime(h));

  // Compiler, flags or the source list changed: every object is rebuilt and the library relinked. nvcc's compiles
  // start first (they are the long ones) and share the cores with the C compiles.
  const cores = navigator.hardwareConcurrency || 2;
  const [cudaObjs, lib] = await Promise.all([
    objects(nvcc, NVCC_FLAGS, cudaSources, join(OUT, "cuda_obj"), newestCudaHeader, libStamp.changed, cores),
    objects(cc, LIB_FLAGS, libSources, join(OUT, "obj"), newestHeader, libStamp.changed),
  ]);
  if (libStamp.changed || lib.rebuilt || cudaObjs.rebuilt || await mtime(LIBRARY_PATH) < 0) {
    if (cudaSources.length > 0) {
      await link(nvcc, ["-shared", ...lib.objects, ...cudaObjs.objects], LIBRARY_PATH, [...LIBS, ...CUDA_LIBS]);
      log(`built ${relative(ROOT, LIBRARY_PATH)} (${libSources.length} C and ${cudaSources.length} CUDA sources)`);
    } else {
      await link(cc, ["-shared", "-pthread", ...lib.objects], LIBRARY_PATH);
      log(`built ${relative(ROOT, LIBRARY_PATH)} (${libSources.length} sources, no CUDA device: nvcc not found)`);
    }
  }
  await libStamp.write();

  const tests: string[] = [];
  if (options.tests) {
    const testSources = await walk(TESTS, ".c", false);
    const testStamp = await Stamp.read("tests", {
      compiler,
      flags: SAN_FLAGS,
      sources: sourceList,
      tests: testSources.map((s) => relative(ROOT, s)),
    });
    const changed = testStamp.changed;
    const testHeaders = await walk(TESTS, ".h", false);
    let newestTestInput = newestHeader;
    for (const h of testHeaders) newestTestInput = Math.max(newestTestInput, await mtime(h));
    const san = await objects(cc, SAN_FLAGS, sources, join(OUT, "asan/obj"), newestHeader, changed);
    const newestSan = Math.max(...await Promise.all(san.objects.map(mtime)), 0);
    const testDir = join(OUT, "tests");
    const jobs: (() => Promise<void>)[] = [];
    for (const source of testSources) {
      const name = source.slice(TESTS.length + 1).replace(/\.c$/, "");
      const exe = join(testDir, name);
      tests.push(exe);
      const built = await mtime(exe);
      if (changed || built < 0 || built < newestTestInput || built < newestSan || built < await mtime(source)) {
        jobs.push(() => link(cc, [...SAN_FLAGS, `-I${TESTS}`, source, ...san.objects], exe));
      }
    }
    await parallel(jobs, navigator.hardwareConcurrency || 2);
    if (jobs.length > 0) log(`built ${jobs.length} sanitized C test programs in ${relative(ROOT, testDir)}`);
    const emu = await buildEmulationTest(lib.objects.filter((o) => !o.endsWith("no_cuda.o")), testDir, log);
    tests.push(...emu);
    // A test program whose source is gone must not keep running.
    try {
      for await (const entry of Deno.readDir(testDir)) {
        const path = join(testDir, entry.name);
        if (entry.isFile && !entry.name.endsWith(".tmp") && !tests.includes(path)) await Deno.remove(path);
      }
    } catch (e) {
      if (!(e instanceof Deno.errors.NotFound)) throw e;
    }
    await testStamp.write();
  }

  return { built: true, library: LIBRARY_PATH, tests };
}

if (import.meta.main) {
  try {
    await buildFfi({ tests: Deno.args.includes("--tests") });
  } catch (e) {
    if (!(e instanceof BuildError)) throw e;
    console.error(`build:ffi failed: ${e.message}`);
    Deno.exit(1);
  }
}
