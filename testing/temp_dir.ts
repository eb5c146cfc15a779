/** Temporary model directories for engine tests. */

/** Runs `setup` then `body` on a fresh temporary directory, which is removed afterwards whatever happens. */
export async function withTempDir(
  setup: (dir: string) => Promise<void>,
  body: (dir: string) => Promise<void>,
): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "rill-test-" });
  try {
    await setup(dir);
    await body(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

/** Rewrites a JSON file through `edit`. */
export async function editJson(path: string, edit: (j: Record<string, unknown>) => void): Promise<void> {
  const j = JSON.parse(await Deno.readTextFile(path));
  edit(j);
  await Deno.writeTextFile(path, JSON.stringify(j));
}
