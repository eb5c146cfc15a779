/**
 * Where a backend reads the model from. onnxruntime-node and the native library open their files by path in native
 * code, which sees only the real file system: a model `--include`d in a `deno compile` binary lives in Deno's
 * embedded file system, readable by `Deno.readFile` but invisible to native code. Such a model's engine files are
 * copied to a temporary directory the backend can open.
 */
import { compiledRoot, isEmbedded } from "../checkpoint/embedded_files.ts";

export { compiledRoot, isEmbedded };

/** A model directory the engine can open, and how to let it go once the backend has loaded the model. */
export interface EngineModelDir {
  readonly dir: string;
  readonly copied: boolean;
  release(): Promise<void>;
}

/** What the engine reads from a model directory (the tokenizer and chat format are loaded by Deno beforehand). */
const CONFIG_FILES = ["config.json", "generation_config.json", "model.safetensors.index.json"] as const;

/**
 * `dir` itself when native code can read it; otherwise a temporary copy of its config files and `weightFiles` (the
 * chosen backend's: the ONNX graph with its external data, or the safetensors files; paths inside `dir`, kept at the
 * same relative place). Releasing a copy deletes it: once the backend is open it holds the weights in memory (or
 * keeps the unlinked files mapped).
 */
export async function engineModelDir(
  dir: string,
  weightFiles: readonly string[],
  root: string | undefined = compiledRoot(),
): Promise<EngineModelDir> {
  if (!isEmbedded(dir, root)) return { dir, copied: false, release: () => Promise.resolve() };
  const temp = await Deno.makeTempDir({ prefix: "rill-model-" });
  const release = () => Deno.remove(temp, { recursive: true }).catch(() => {});
  try {
    for (const name of CONFIG_FILES) {
      const bytes = await Deno.readFile(`${dir}/${name}`).catch((error) => {
        if (error instanceof Deno.errors.NotFound) return null;
        throw error;
      });
      if (bytes !== null) await Deno.writeFile(`${temp}/${name}`, bytes);
    }
    const prefix = `${dir.replace(/\/+$/, "")}/`;
    for (const path of weightFiles) {
      if (!path.startsWith(prefix)) throw new Error(`weight file '${path}' is outside ${prefix}`);
      const target = `${temp}/${path.slice(prefix.length)}`;
      await Deno.mkdir(target.slice(0, target.lastIndexOf("/")), { recursive: true });
      await Deno.writeFile(target, await Deno.readFile(path));
    }
  } catch (error) {
    await release();
    throw error;
  }
  return { dir: temp, copied: true, release };
}
