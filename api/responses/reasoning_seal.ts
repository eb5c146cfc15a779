/**
 * Opaque `encrypted_content` for items the client carries between stateless turns (reasoning, compaction).
 *
 * Blob = base64( version (1 byte) ‖ nonce (12) ‖ AES-256-GCM ciphertext ‖ tag (16) ). The additional authenticated
 * data binds the blob to the version, the item kind and the served model, so a blob cannot be moved to another
 * model or from a compaction item into a reasoning item (or back) without failing authentication. The plaintext is
 * JSON: what rendering needs to put the content back into the prompt exactly as the model wrote it.
 *
 * node:crypto's GCM is synchronous: the stream emitter seals a reasoning item in the same step that closes it.
 */
import { Buffer } from "node:buffer";
import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto";
import { invalidRequest } from "../../prompt/errors.ts";

export const SEAL_VERSION = 1;
const NONCE = 12;
const TAG = 16;
export const KEY_BYTES = 32;

export type SealKind = "reasoning" | "compaction";

/** What a sealed reasoning item holds: the text of its analysis/think section, verbatim. */
export interface SealedReasoning {
  readonly text: string;
}

/** What a sealed compaction item holds: the summary the model wrote. */
export interface SealedCompaction {
  readonly summary: string;
}

export class ReasoningSeal {
  readonly #key: Uint8Array;
  readonly #modelId: string;

  constructor(key: Uint8Array, modelId: string) {
    if (key.length !== KEY_BYTES) throw new RangeError(`the seal key must be ${KEY_BYTES} bytes, got ${key.length}`);
    this.#key = key;
    this.#modelId = modelId;
  }

  #aad(kind: SealKind): Uint8Array {
    return new TextEncoder().encode(`rill-seal\0${SEAL_VERSION}\0${kind}\0${this.#modelId}`);
  }

  #seal(kind: SealKind, payload: unknown): string {
    const nonce = randomBytes(NONCE);
    const cipher = createCipheriv("aes-256-gcm", this.#key, nonce);
    cipher.setAAD(this.#aad(kind));
    const body = Buffer.concat([cipher.update(JSON.stringify(payload), "utf8"), cipher.final()]);
    return Buffer.concat([Buffer.from([SEAL_VERSION]), nonce, body, cipher.getAuthTag()]).toString("base64");
  }

  /** The payload, or a 400 naming `param` when the blob is malformed, tampered, foreign or of another kind. */
  #open(kind: SealKind, blob: string, param: string): unknown {
    const refuse = () =>
      invalidRequest(
        `The encrypted content of this ${kind} item could not be verified: it was changed, cut, or made by another ` +
          "server key or model",
        param,
        "invalid_encrypted_content",
      );
    if (!/^[A-Za-z0-9+/]*={0,2}$/.test(blob)) throw refuse();
    const bytes = Buffer.from(blob, "base64");
    if (bytes.length < 1 + NONCE + TAG || bytes[0] !== SEAL_VERSION) throw refuse();
    const decipher = createDecipheriv("aes-256-gcm", this.#key, bytes.subarray(1, 1 + NONCE));
    decipher.setAAD(this.#aad(kind));
    decipher.setAuthTag(bytes.subarray(bytes.length - TAG));
    let text: string;
    try {
      text = Buffer.concat([decipher.update(bytes.subarray(1 + NONCE, bytes.length - TAG)), decipher.final()])
        .toString("utf8");
    } catch {
      throw refuse();
    }
    // Authenticated: the payload is one this server wrote, so it parses; a failure would be a server bug.
    return JSON.parse(text);
  }

  sealReasoning(text: string): string {
    return this.#seal("reasoning", { text } satisfies SealedReasoning);
  }

  openReasoning(blob: string, param: string): SealedReasoning {
    const payload = this.#open("reasoning", blob, param) as Partial<SealedReasoning> | null;
    if (typeof payload?.text !== "string") throw new TypeError("sealed reasoning without text");
    return { text: payload.text };
  }

  sealCompaction(summary: string): string {
    return this.#seal("compaction", { summary } satisfies SealedCompaction);
  }

  openCompaction(blob: string, param: string): SealedCompaction {
    const payload = this.#open("compaction", blob, param) as Partial<SealedCompaction> | null;
    if (typeof payload?.summary !== "string") throw new TypeError("sealed compaction without summary");
    return { summary: payload.summary };
  }
}
