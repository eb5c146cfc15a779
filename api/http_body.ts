/**
 * Reads a JSON request body with a hard size limit. The limit is enforced while streaming, so a client that lies
 * about (or omits) Content-Length still cannot make the server buffer more than `maxBytes`.
 */
import { invalidRequest, payloadTooLarge, unsupportedMediaType } from "./errors.ts";
import { checkBodyDepth } from "./json_limits.ts";

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
  // With a declared length the HTTP layer already refuses a longer body, so one read is safe (and cheapest).
  const bytes = declared !== null ? new Uint8Array(await request.arrayBuffer()) : await readCapped(request, maxBytes);
  let value: unknown;
  try {
    value = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes));
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
  checkBodyDepth(value);
  return value as Record<string, unknown>;
}

/** A chunked body of unknown length, refused as soon as it grows past `maxBytes`. */
async function readCapped(request: Request, maxBytes: number): Promise<Uint8Array> {
  const chunks: Uint8Array[] = [];
  let size = 0;
  if (request.body !== null) {
    for await (const chunk of request.body) {
      size += chunk.byteLength;
      if (size > maxBytes) throw payloadTooLarge(maxBytes);
      chunks.push(chunk);
    }
  }
  const bytes = new Uint8Array(size);
  let at = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, at);
    at += chunk.byteLength;
  }
  return bytes;
}
