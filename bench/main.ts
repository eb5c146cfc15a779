/**
 * Runs every `bench/*_bench.ts` file: each exports `run(): Promise<void>` and prints its own result lines, so a new
 * benchmark is a new file, not an edit here. Arguments filter by file name (substring), e.g.
 * `deno task bench pipeline`.
 */
const dir = new URL(".", import.meta.url);
const filters = Deno.args;
const files: string[] = [];
for await (const entry of Deno.readDir(dir)) {
  if (!entry.isFile || !entry.name.endsWith("_bench.ts")) continue;
  if (filters.length > 0 && !filters.some((f) => entry.name.includes(f))) continue;
  files.push(entry.name);
}
files.sort();
if (files.length === 0) {
  console.error(`no benchmark matches ${filters.join(" ")}`);
  Deno.exit(1);
}
for (const name of files) {
  const mod: { run?: () => Promise<void> } = await import(new URL(name, dir).href);
  if (typeof mod.run !== "function") throw new Error(`${name} does not export run()`);
  await mod.run();
}
