/**
 * The server key that seals `encrypted_content` (reasoning_seal.ts): `--reasoning-key` (64 hex digits or base64 of
 * 32 bytes), the contents of `--reasoning-key-file`, or a key generated at first start and kept in the data directory
 * (`reasoning.key`, mode 0600) so blobs stay readable across restarts. With `--data-dir :memory:` and no key given,
 * the key lives as long as the process. With `--store postgres://…` and no key given, the key is generated once and
 * kept in the database, the first replica to start winning, so a blob sealed on one replica opens on every other.
 */
import { Buffer } from "node:buffer";
import { CliError } from "./cli_options.ts";
import { KEY_BYTES } from "../api/responses/reasoning_seal.ts";
import type { ResponseStore } from "../api/store/response_store.ts";

export const KEY_FILE_NAME = "reasoning.key";

export interface ReasoningKeySource {
  readonly reasoningKey: string | undefined;
  readonly reasoningKeyFile: string | undefined;
  readonly dataDir: string;
}

/** 64 hex digits or base64 (standard or URL-safe) of 32 bytes; anything else is refused. */
export function parseKey(text: string, origin: string): Uint8Array {
  const t = text.trim();
  if (/^[0-9a-fA-F]{64}$/.test(t)) return new Uint8Array(Buffer.from(t, "hex"));
  if (/^[A-Za-z0-9+/_-]+={0,2}$/.test(t)) {
    const bytes = Buffer.from(t.replaceAll("-", "+").replaceAll("_", "/"), "base64");
    if (bytes.length === KEY_BYTES) return new Uint8Array(bytes);
  }
  throw new CliError(`${origin} must be ${KEY_BYTES} bytes as 64 hex digits or base64`);
}

function readKeyFile(path: string, origin: string): Uint8Array {
  let text: string;
  try {
    text = Deno.readTextFileSync(path);
  } catch (error) {
    throw new CliError(`Cannot read ${origin} '${path}': ${error instanceof Error ? error.message : error}`);
  }
  return parseKey(text, `${origin} '${path}'`);
}

export function resolveReasoningKey(source: ReasoningKeySource): Uint8Array {
  if (source.reasoningKey !== undefined && source.reasoningKeyFile !== undefined) {
    throw new CliError("Give the reasoning key once: --reasoning-key or --reasoning-key-file, not both");
  }
  if (source.reasoningKey !== undefined) return parseKey(source.reasoningKey, "--reasoning-key");
  if (source.reasoningKeyFile !== undefined) return readKeyFile(source.reasoningKeyFile, "--reasoning-key-file");
  if (source.dataDir === ":memory:") return crypto.getRandomValues(new Uint8Array(KEY_BYTES));
  const path = `${source.dataDir}/${KEY_FILE_NAME}`;
  const draft = `${path}.${Deno.pid}.${crypto.randomUUID()}`;
  try {
    Deno.mkdirSync(source.dataDir, { recursive: true });
    const key = crypto.getRandomValues(new Uint8Array(KEY_BYTES));
    // Written whole under a private name, then linked into place: a link never replaces an existing file, so two
    // servers starting on one data directory agree on the first one's key, and no reader sees a half-written file.
    Deno.writeTextFileSync(draft, Buffer.from(key).toString("hex") + "\n", { createNew: true, mode: 0o600 });
    Deno.linkSync(draft, path);
    return key;
  } catch (error) {
    if (!(error instanceof Deno.errors.AlreadyExists)) {
      throw new CliError(
        `Cannot create the reasoning key '${path}': ${error instanceof Error ? error.message : error}`,
      );
    }
  } finally {
    try {
      Deno.removeSync(draft);
    } catch {
      // Never written (the directory could not be made): nothing to remove.
    }
  }
  return readKeyFile(path, "the reasoning key file");
}

/** The key for this deployment: given (flag or file), else kept in the shared `--store`, else as above. */
export async function deploymentReasoningKey(
  source: ReasoningKeySource & { readonly store: string | undefined },
  store: ResponseStore,
): Promise<Uint8Array> {
  const given = source.reasoningKey !== undefined || source.reasoningKeyFile !== undefined;
  if (given || source.store === undefined) return resolveReasoningKey(source);
  return await store.reasoningKey(crypto.getRandomValues(new Uint8Array(KEY_BYTES)));
}
