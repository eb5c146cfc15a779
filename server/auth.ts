/**
 * Bearer API-key check. The comparison runs over SHA-256 digests of both keys, so its time depends on neither the
 * key's length nor the position of the first differing byte.
 */
import { unauthorized } from "../prompt/errors.ts";

const utf8 = new TextEncoder();

async function digest(text: string): Promise<Uint8Array> {
  return new Uint8Array(await crypto.subtle.digest("SHA-256", utf8.encode(text)));
}

export class ApiKeyCheck {
  readonly #expected: Promise<Uint8Array>;

  constructor(key: string) {
    this.#expected = digest(key);
  }

  /** Throws a 401 ApiError unless the request carries `Authorization: Bearer <key>`. */
  async verify(request: Request): Promise<void> {
    const header = request.headers.get("authorization");
    const match = header === null ? null : /^Bearer\s+(.+)$/i.exec(header.trim());
    if (match === null) {
      throw unauthorized("You didn't provide an API key. Send it as 'Authorization: Bearer <key>'.");
    }
    const [expected, given] = await Promise.all([this.#expected, digest(match[1]!)]);
    let diff = 0;
    for (let i = 0; i < expected.length; i++) diff |= expected[i]! ^ given[i]!;
    if (diff !== 0) throw unauthorized("Incorrect API key provided.");
  }
}
