import assert from "node:assert/strict";
import { ABI_VERSION, LIBRARY_PATH, loadableLibraryFile } from "../../ffi/binding/library.ts";

Deno.test("native binding: the library is loaded in place from a checkout", async () => {
  const { file, cleanup } = await loadableLibraryFile(LIBRARY_PATH, undefined);
  assert.equal(file, LIBRARY_PATH);
  await cleanup();
  assert.ok((await Deno.stat(LIBRARY_PATH)).isFile, "cleanup leaves the build output alone");
});

Deno.test("native binding: inside a compiled binary's embedded files the library is copied to a real file first", async () => {
  // The build folder's parent plays the embedded root (`<tmp>/deno-compile-rill/` in a compiled binary).
  const root = LIBRARY_PATH.slice(0, LIBRARY_PATH.indexOf("/build/ffi/"));
  const { file, cleanup } = await loadableLibraryFile(LIBRARY_PATH, root);
  assert.notEqual(file, LIBRARY_PATH);
  assert.deepEqual(await Deno.readFile(file), await Deno.readFile(LIBRARY_PATH));
  const lib = Deno.dlopen(file, { rill_abi_version: { parameters: [], result: "i32" } });
  try {
    assert.equal(lib.symbols.rill_abi_version(), ABI_VERSION);
  } finally {
    lib.close();
  }
  await cleanup();
  await assert.rejects(Deno.stat(file), Deno.errors.NotFound);
});
