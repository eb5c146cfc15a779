import assert from "node:assert/strict";
import { LAYOUT } from "../../engine/backends/native_backend.ts";

const ROOT = new URL("../../", import.meta.url).pathname;

/** The binding's struct offsets against the C compiler's: a program over ffi/include/rill.h prints them as JSON. */
Deno.test("native binding: struct offsets and sizes match ffi/include/rill.h", async () => {
  const structs = {
    stepBatch: "rill_step_batch",
    stepResult: "rill_step_result",
    options: "rill_options",
    info: "rill_info",
  };
  const lines: string[] = [];
  for (const [key, cName] of Object.entries(structs)) {
    const fields = Object.keys(LAYOUT[key as keyof typeof LAYOUT]).filter((f) => f !== "size");
    const parts = [`"size":%zu`, ...fields.map((f) => `"${f}":%zu`)].join(",");
    const args = [`sizeof(${cName})`, ...fields.map((f) => `offsetof(${cName}, ${f})`)].join(", ");
    lines.push(`  printf("\\"${key}\\":{${parts.replaceAll('"', '\\"')}}${key === "info" ? "" : ","}\\n", ${args});`);
  }
  const source = `#include <stddef.h>\n#include <stdio.h>\n#include "rill.h"\nint main(void) {\n  printf("{\\n");\n${
    lines.join("\n")
  }\n  printf("}\\n");\n  return 0;\n}\n`;
  const dir = await Deno.makeTempDir({ prefix: "rill-layout-" });
  try {
    await Deno.writeTextFile(`${dir}/layout.c`, source);
    const cc = await new Deno.Command(Deno.env.get("CC") || "cc", {
      args: ["-std=c17", `-I${ROOT}ffi/include`, `${dir}/layout.c`, "-o", `${dir}/layout`],
      stderr: "piped",
    }).output();
    assert.equal(cc.code, 0, new TextDecoder().decode(cc.stderr));
    const run = await new Deno.Command(`${dir}/layout`, { stdout: "piped" }).output();
    const actual = JSON.parse(new TextDecoder().decode(run.stdout));
    assert.deepEqual(actual, JSON.parse(JSON.stringify(LAYOUT)));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
