/**
 * Reads a JSON request body with a hard size limit. The limit is enforced while streaming, so a client that lies
 * about (or omits) Content-Length still cannot make the server buffer more than `maxBytes`.
 */
import { ClientGone, invalidRequest, payloadTooLarge, unsupportedMediaType } from "../prompt/errors.ts";
import { checkBodyDepth } from "../api/json_limits.ts";
import { LoopYielder } from "../prompt/loop_yield.ts";

/** Characters of body text above which parsing gets a turn of the event loop before and after it. */
const LARGE_TEXT = 1 << 20;

/** Default body limit: Codex sends ~40 KB per request; long agent histories reach a few MB. */
export const DEFAULT_MAX_BODY_BYTES = 16 * 1024 * 1024;

function isJson(contentType: string | null): boolean {
  if (contentType === null) return false;
  const media = contentType.split(";")[0]!.trim().toLowerCase();
  return media === "application/json" || (media.startsWith("application/") && media.endsWith("+json"));
}

export async function readJsonBody(request: Request, maxBytes: number): Promise<Record<string, unknown>> {
  const contentType = request.headers.get("content-type");
  if (!isJson(contentType)) throw unsupportedMediaType(contentType);
  const declared = request.headers.get("content-length");
  if (declared !== null && Number(declared) > maxBytes) throw payloadTooLarge(maxBytes);
  const loop = new LoopYielder();
  const text = await readText(request, declared === null ? null : Number(declared), maxBytes, loop);
  let value: unknown;
  try {
    // One synchronous call (about 1 ms per MB of text): a turn of the loop before it, so it follows other work.
    if (text.length > LARGE_TEXT) await loop.yield();
    value = JSON.parse(text);
  } catch {
    throw invalidRequest(
      "We could not parse the JSON body of your request. The body must be valid UTF-8 JSON.",
      null,
      "invalid_json",
    );
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw invalidRequest("The request body must be a JSON object", null, "invalid_type");
  }
  if (text.length > LARGE_TEXT) await loop.yield();
  checkBodyDepth(value);
  return value as Record<string, unknown>;
}

/**
 * The body as text, decoded chunk by chunk as it arrives (a 16 MB body decoded in one call holds the event loop for
 * tens of milliseconds), and refused as soon as it grows past `maxBytes` (a chunked body has no declared length).
 * A body that is not valid UTF-8 is the same 400 as one that is not JSON.
 */
async function readText(
  request: Request,
  declared: number | null,
  maxBytes: number,
  loop: LoopYielder,
): Promise<string> {
  const decoder = new TextDecoder("utf-8", { fatal: true });
  const parts: string[] = [];
  let size = 0;
  const decode = (chunk?: Uint8Array) => {
    try {
      parts.push(chunk === undefined ? decoder.decode() : decoder.decode(chunk, { stream: true }));
    } catch {
      throw invalidRequest(
        "We could not parse the JSON body of your request. The body must be valid UTF-8 JSON.",
        null,
        "invalid_json",
      );
    }
  };
  if (request.body !== null) {
    const reader = request.body.getReader();
    for (;;) {
      let read: ReadableStreamReadResult<Uint8Array>;
      try {
        read = await reader.read();
      } catch (error) {
        // The body stopped arriving: the client went away mid-upload (or broke the framing).
        throw new ClientGone(error);
      }
      if (read.done) break;
      size += read.value.byteLength;
      if (size > maxBytes || (declared !== null && size > declared)) {
        reader.cancel().catch(() => {});
        throw payloadTooLarge(maxBytes);
      }
      decode(read.value);
      // Buffered chunks resolve reads as microtasks: without a macrotask now and then, reading a large body
      // would hold the loop from its first byte to its last.
      await loop.maybeYield();
    }
  }
  decode();
  if (parts.length > 1) await loop.yield();
  return parts.join("");
}
