/**
 * llama.cpp for the side-by-side benchmarks: the node-llama-cpp npm package (pinned) ships the llama.cpp release it
 * binds as a git bundle and @node-llama-cpp/linux-x64 its prebuilt CPU libraries (one libggml-cpu per x86 level,
 * chosen at run time). Both are installed into build/bench/llama/ with npm (scripts not run: nothing is downloaded or
 * built beyond the packages), the release's headers are checked out of the bundle, and bench/llama_decode.c is
 * compiled against them and linked to the prebuilt libraries.
 */
import { join } from "node:path";
import { exec } from "./exec.ts";
import { exists } from "./exists.ts";

const ROOT = new URL("../", import.meta.url).pathname;
/** node-llama-cpp 3.21.1 bundles a llama.cpp with the gpt-oss architecture and MXFP4 (ggml type 39). */
export const NODE_LLAMA_CPP = "3.21.1";

export interface LlamaCpp {
  /** bench/llama_decode.c, built. */
  readonly tool: string;
  /** The prebuilt libraries' folder (llama_decode's LIBDIR argument). */
  readonly libdir: string;
  /** The llama.cpp release the package bundles, as the package names it. */
  readonly release: string;
}

/** Installs (once) and builds; a sentence saying why not when npm, git or the compiler fail. */
export async function llamaCpp(out: string): Promise<LlamaCpp | string> {
  const dir = join(out, "llama");
  const pkg = join(dir, "node_modules/node-llama-cpp");
  const libdir = join(dir, "node_modules/@node-llama-cpp/linux-x64/bins/linux-x64");
  const src = join(dir, "src");
  try {
    if (Deno.build.os !== "linux" || Deno.build.arch !== "x86_64") return "prebuilt libraries for linux x64 only";
    if (!(await exists(join(libdir, "libllama.v0.4.0.so"))) || !(await exists(join(pkg, "package.json")))) {
      await Deno.mkdir(dir, { recursive: true });
      await Deno.writeTextFile(join(dir, "package.json"), '{"private": true}\n');
      await exec("npm", [
        "install",
        "--prefix",
        dir,
        "--save-exact",
        "--ignore-scripts",
        "--omit=optional",
        "--no-audit",
        "--no-fund",
        `node-llama-cpp@${NODE_LLAMA_CPP}`,
        `@node-llama-cpp/linux-x64@${NODE_LLAMA_CPP}`,
      ]);
    }
    if (!(await exists(join(src, "include/llama.h")))) {
      await Deno.remove(src, { recursive: true }).catch(() => {});
      // Only the headers are checked out: a whole llama.cpp tree under the repository would be type-checked too.
      await exec("git", ["clone", "--quiet", "--no-checkout", join(pkg, "llama/gitRelease.bundle"), src]);
      await exec("git", ["-C", src, "checkout", "HEAD", "--", "include", "ggml/include"]);
    }
    const info = JSON.parse(await Deno.readTextFile(join(pkg, "llama/llama.cpp.info.json"))) as { tag?: string };
    const tool = join(out, "bin", "llama_decode");
    await Deno.mkdir(join(out, "bin"), { recursive: true });
    await exec(Deno.env.get("CC") || "cc", [
      "-std=c17",
      "-O2",
      "-Wall",
      "-Wextra",
      "-Werror",
      `-I${src}/include`,
      `-I${src}/ggml/include`,
      join(ROOT, "bench/llama_decode.c"),
      `-L${libdir}`,
      "-l:libllama.v0.4.0.so",
      "-l:libggml.v0.4.0.so",
      "-l:libggml-base.so",
      `-Wl,-rpath,${libdir}`,
      "-o",
      tool,
    ]);
    return { tool, libdir, release: `${info.tag ?? "?"} (node-llama-cpp ${NODE_LLAMA_CPP})` };
  } catch (err) {
    return err instanceof Error ? err.message.split("\n")[0]! : String(err);
  }
}
