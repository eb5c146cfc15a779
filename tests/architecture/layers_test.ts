/**
 * The tree is the architecture: each top-level folder is a layer that may import only the layers below it, so data
 * flows one way (request → prompt → engine; token ids → parse → emit → sequence → SSE). Production code never imports
 * the stream validator (`conformance/`) or test support (`testing/`, `tests/`), and no module takes part in an import
 * cycle, type-only imports included.
 */
import assert from "node:assert/strict";

const ROOT = new URL("../../", import.meta.url).pathname;

/** Which folders each layer may import from (its own folder is always allowed). */
const ALLOWED: Record<string, readonly string[]> = {
  checkpoint: [],
  ffi: ["checkpoint"],
  engine: ["checkpoint", "ffi"],
  parsers: ["checkpoint"],
  grammar: ["checkpoint", "engine"],
  prompt: ["checkpoint", "engine", "parsers", "grammar"],
  events: ["checkpoint", "engine", "parsers", "grammar"],
  conformance: ["events"],
  api: ["checkpoint", "engine", "parsers", "grammar", "prompt", "events"],
  server: ["checkpoint", "ffi", "engine", "parsers", "grammar", "prompt", "events", "api"],
  "main.ts": ["server"],
  testing: ["checkpoint", "ffi", "engine", "parsers", "grammar", "prompt", "events", "conformance", "api", "server"],
  bench: [
    "checkpoint",
    "ffi",
    "engine",
    "parsers",
    "grammar",
    "prompt",
    "events",
    "conformance",
    "api",
    "server",
    "testing",
  ],
};

const IMPORT =
  /(?:^|\n)\s*(?:import|export)\b[^;]*?\bfrom\s*["'](\.{1,2}\/[^"']+)["']|\bimport\(\s*["'](\.{1,2}\/[^"']+)["']\s*\)/g;

async function sourceFiles(dir: string, out: string[] = []): Promise<string[]> {
  for await (const entry of Deno.readDir(`${ROOT}${dir}`)) {
    const path = dir === "" ? entry.name : `${dir}/${entry.name}`;
    if (entry.isDirectory) {
      if (
        ["node_modules", "models", "tests", "scripts", "docs", "build", "cov", ".git", ".data"].includes(path)
      ) {
        continue;
      }
      if (path.startsWith(".")) continue;
      await sourceFiles(path, out);
    } else if (entry.isFile && path.endsWith(".ts")) out.push(path);
  }
  return out;
}

function layerOf(path: string): string {
  const top = path.split("/")[0]!;
  return top;
}

function resolve(from: string, spec: string): string {
  const parts = from.split("/").slice(0, -1);
  for (const piece of spec.split("/")) {
    if (piece === "." || piece === "") continue;
    if (piece === "..") parts.pop();
    else parts.push(piece);
  }
  return parts.join("/");
}

async function importGraph(): Promise<Map<string, string[]>> {
  const graph = new Map<string, string[]>();
  for (const file of await sourceFiles("")) {
    const text = await Deno.readTextFile(`${ROOT}${file}`);
    const targets: string[] = [];
    for (const m of text.matchAll(IMPORT)) targets.push(resolve(file, (m[1] ?? m[2])!));
    graph.set(file, targets);
  }
  return graph;
}

/** Import edges that break the layer table, as "from → to" lines. */
export function layerViolations(graph: ReadonlyMap<string, readonly string[]>): string[] {
  const bad: string[] = [];
  for (const [from, targets] of graph) {
    const layer = layerOf(from);
    const allowed = ALLOWED[layer];
    for (const to of targets) {
      const target = layerOf(to);
      if (target === layer) continue;
      if (allowed === undefined || !allowed.includes(target)) bad.push(`${from} → ${to}`);
    }
  }
  return bad;
}

/** One cycle per strongly connected component of more than one module (or a self-import), as a path. */
export function importCycles(graph: ReadonlyMap<string, readonly string[]>): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const cycles: string[][] = [];
  let next = 0;
  const visit = (v: string): void => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!graph.has(w)) continue;
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) === index.get(v)) {
      const component: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        component.push(w);
      } while (w !== v);
      if (component.length > 1 || (graph.get(v) ?? []).includes(v)) cycles.push(component.sort());
    }
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return cycles;
}

Deno.test("layers: every import points to an allowed lower layer", async () => {
  const graph = await importGraph();
  assert.ok(graph.size > 100, `found only ${graph.size} modules; the scan is broken`);
  for (const file of graph.keys()) {
    assert.ok(layerOf(file) in ALLOWED, `${file}: top-level folder "${layerOf(file)}" is in no layer`);
  }
  assert.deepEqual(layerViolations(graph), []);
});

Deno.test("layers: no import cycles between modules", async () => {
  assert.deepEqual(importCycles(await importGraph()), []);
});

Deno.test("layers: the checks catch an upward import and a cycle", () => {
  const graph = new Map<string, string[]>([
    ["engine/a.ts", ["server/server.ts"]],
    ["api/responses/b.ts", ["server/server.ts"]],
    ["server/server.ts", ["events/x.ts"]],
    ["events/x.ts", ["events/y.ts"]],
    ["events/y.ts", ["events/x.ts"]],
  ]);
  assert.deepEqual(layerViolations(graph), ["engine/a.ts → server/server.ts", "api/responses/b.ts → server/server.ts"]);
  assert.deepEqual(importCycles(graph), [["events/x.ts", "events/y.ts"]]);
});
