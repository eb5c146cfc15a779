/**
 * CORS for browser clients (`--allowed-origins`). Origins are exact (`https://app.example`) or `*` for any; none by
 * default, and then no CORS header is ever sent. For an allowed origin:
 * - a preflight (`OPTIONS` with `Access-Control-Request-Method`) is answered 204 before routing and before the API
 *   key check (browsers send no credentials on a preflight), allowing the methods rill serves and the headers the
 *   browser asked for;
 * - every other response (errors and SSE streams included) carries `Access-Control-Allow-Origin` with the request's
 *   origin, so credentials work even under `*`, and exposes the headers clients read.
 * A request from any other origin gets no CORS header at all (the browser then blocks it); its preflight goes on to
 * routing like any other `OPTIONS`.
 */

const METHODS = "GET, POST, DELETE, OPTIONS";
/** Allowed when a preflight names no headers. */
const DEFAULT_HEADERS = "authorization, content-type, x-request-id, openai-organization, openai-project";
const EXPOSED = "x-request-id, retry-after, allow";
const MAX_AGE = "600";

export class Cors {
  readonly #any: boolean;
  readonly #origins: ReadonlySet<string>;

  constructor(allowedOrigins: readonly string[]) {
    const origins = allowedOrigins.map((o) => o.trim()).filter((o) => o !== "");
    this.#any = origins.includes("*");
    this.#origins = new Set(origins.map((o) => o.replace(/\/+$/, "").toLowerCase()));
  }

  #allowed(request: Request): string | null {
    const origin = request.headers.get("origin");
    if (origin === null || origin === "") return null;
    return this.#any || this.#origins.has(origin.toLowerCase()) ? origin : null;
  }

  /**
   * Whether a WebSocket upgrade may proceed. Browsers apply no CORS to WebSockets and a socket needs no API key when
   * none is configured, so a cross-site page could otherwise drive a local rill: a request with an `Origin` (every
   * browser sends one) must come from an allowed origin; one without (non-browser clients) is allowed.
   */
  allowsUpgrade(request: Request): boolean {
    const origin = request.headers.get("origin");
    return origin === null || this.#allowed(request) !== null;
  }

  /** The answer to a preflight from an allowed origin; null for anything else. */
  preflight(request: Request): Response | null {
    if (request.method !== "OPTIONS" || !request.headers.has("access-control-request-method")) return null;
    const origin = this.#allowed(request);
    if (origin === null) return null;
    return new Response(null, {
      status: 204,
      headers: {
        "access-control-allow-origin": origin,
        "access-control-allow-methods": METHODS,
        "access-control-allow-headers": request.headers.get("access-control-request-headers") ?? DEFAULT_HEADERS,
        "access-control-allow-credentials": "true",
        "access-control-max-age": MAX_AGE,
        vary: "Origin, Access-Control-Request-Method, Access-Control-Request-Headers",
      },
    });
  }

  /** Adds the CORS headers to `response` when the request came from an allowed origin. */
  decorate(request: Request, response: Response): Response {
    const origin = this.#allowed(request);
    if (origin === null) return response;
    const h = response.headers;
    h.set("access-control-allow-origin", origin);
    h.set("access-control-allow-credentials", "true");
    h.set("access-control-expose-headers", EXPOSED);
    h.append("vary", "Origin");
    return response;
  }
}

/** `--allowed-origins` text: a comma-separated list. */
export function parseOrigins(text: string | undefined): string[] {
  if (text === undefined) return [];
  return text.split(",").map((o) => o.trim()).filter((o) => o !== "");
}
