/** The seal key: from --reasoning-key, from a key file, or generated once into the data directory (mode 0600). */
import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import { CliError, parseServeArgs, type ServeConfig } from "../../server/cli_options.ts";
import { KEY_FILE_NAME, resolveReasoningKey } from "../../server/reasoning_key.ts";
import { ReasoningSeal } from "../../api/responses/reasoning_seal.ts";
import { ApiError } from "../../prompt/errors.ts";

const HEX = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";

function source(over: Partial<Parameters<typeof resolveReasoningKey>[0]>) {
  return { reasoningKey: undefined, reasoningKeyFile: undefined, dataDir: ":memory:", ...over };
}

Deno.test("reasoning key: --reasoning-key as hex or base64 (standard or URL-safe), RILL_REASONING_KEY", () => {
  const expected = Buffer.from(HEX, "hex");
  assert.deepEqual(Buffer.from(resolveReasoningKey(source({ reasoningKey: HEX }))), expected);
  assert.deepEqual(Buffer.from(resolveReasoningKey(source({ reasoningKey: expected.toString("base64") }))), expected);
  assert.deepEqual(
    Buffer.from(resolveReasoningKey(source({ reasoningKey: expected.toString("base64url") }))),
    expected,
  );
  const config = parseServeArgs([], (name) => name === "RILL_REASONING_KEY" ? HEX : undefined) as ServeConfig;
  assert.equal(config.reasoningKey, HEX);
  const flags = parseServeArgs(["--reasoning-key-file", "/k"], () => undefined) as ServeConfig;
  assert.equal(flags.reasoningKeyFile, "/k");
  for (const bad of ["abc", HEX.slice(2), Buffer.alloc(16).toString("base64"), "zz" + HEX.slice(2)]) {
    assert.throws(() => resolveReasoningKey(source({ reasoningKey: bad })), CliError, bad);
  }
  assert.throws(() => resolveReasoningKey(source({ reasoningKey: HEX, reasoningKeyFile: "/x" })), CliError);
});

Deno.test("reasoning key: --reasoning-key-file is read (whitespace ignored); a missing file is a CliError", async () => {
  const dir = await Deno.makeTempDir({ prefix: "rill-key-" });
  try {
    await Deno.writeTextFile(`${dir}/k`, `  ${HEX}\n`);
    assert.deepEqual(
      Buffer.from(resolveReasoningKey(source({ reasoningKeyFile: `${dir}/k` }))),
      Buffer.from(HEX, "hex"),
    );
    assert.throws(() => resolveReasoningKey(source({ reasoningKeyFile: `${dir}/none` })), CliError);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("reasoning key: generated once into the data directory, mode 0600, and the same key after a restart", async () => {
  const dir = await Deno.makeTempDir({ prefix: "rill-key-" });
  try {
    const data = `${dir}/data`;
    const first = resolveReasoningKey(source({ dataDir: data }));
    assert.equal(first.length, 32);
    const info = await Deno.stat(`${data}/${KEY_FILE_NAME}`);
    if (Deno.build.os !== "windows") assert.equal(info.mode! & 0o777, 0o600);
    const again = resolveReasoningKey(source({ dataDir: data }));
    assert.deepEqual(again, first);
    // A blob sealed before the "restart" opens after it.
    const blob = new ReasoningSeal(first, "m").sealReasoning("kept");
    assert.equal(new ReasoningSeal(again, "m").openReasoning(blob, "p").text, "kept");
    // Without a data directory there is nothing to keep: a fresh key each time.
    assert.notDeepEqual(resolveReasoningKey(source({})), resolveReasoningKey(source({})));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("ReasoningSeal: round-trips unicode; binds model and kind; refuses other versions", () => {
  const key = crypto.getRandomValues(new Uint8Array(32));
  const seal = new ReasoningSeal(key, "m");
  const text = "Let me think… ✓ \u0000 <|end|>";
  const blob = seal.sealReasoning(text);
  assert.equal(seal.openReasoning(blob, "p").text, text);
  assert.notEqual(seal.sealReasoning(text), blob, "a fresh nonce per seal");
  assert.equal(seal.openCompaction(seal.sealCompaction("sum"), "p").summary, "sum");
  const refused = (f: () => unknown, param: string) =>
    assert.throws(f, (e: unknown) => e instanceof ApiError && e.status === 400 && e.param === param);
  refused(() => new ReasoningSeal(key, "other").openReasoning(blob, "a"), "a");
  refused(() => seal.openCompaction(blob, "b"), "b");
  const bytes = Buffer.from(blob, "base64");
  bytes[0] = 2;
  refused(() => seal.openReasoning(bytes.toString("base64"), "c"), "c");
  assert.throws(() => new ReasoningSeal(new Uint8Array(16), "m"), RangeError);
});

Deno.test("reasoning key: an unwritable data directory is a CliError; no draft file is left behind", async () => {
  const dir = await Deno.makeTempDir({ prefix: "rill-key-" });
  try {
    await Deno.writeTextFile(`${dir}/file`, "");
    assert.throws(() => resolveReasoningKey(source({ dataDir: `${dir}/file/data` })), CliError);
    resolveReasoningKey(source({ dataDir: dir }));
    const names = [...Deno.readDirSync(dir)].map((e) => e.name).sort();
    assert.deepEqual(names, ["file", KEY_FILE_NAME]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
