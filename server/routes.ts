/**
 * The route table. A path that exists with another method is a 405 (with `Allow`), an unknown path a 404. Routes
 * are reported by pattern (`/v1/responses/{id}`) so metrics labels never carry ids.
 */

export type RouteMatch =
  | { readonly route: "/health" }
  | { readonly route: "/metrics" }
  | { readonly route: "/version" }
  | { readonly route: "/v1/models" }
  | { readonly route: "/v1/models/{id}"; readonly id: string }
  | { readonly route: "/v1/responses" }
  | { readonly route: "/v1/responses/input_tokens" }
  | { readonly route: "/v1/responses/compact" }
  | { readonly route: "/v1/responses/{id}"; readonly id: string }
  | { readonly route: "/v1/responses/{id}/input_items"; readonly id: string }
  | { readonly route: "/v1/responses/{id}/cancel"; readonly id: string }
  | { readonly route: "/v1/conversations" }
  | { readonly route: "/v1/conversations/{id}"; readonly id: string }
  | { readonly route: "/v1/conversations/{id}/items"; readonly id: string }
  | { readonly route: "/v1/conversations/{id}/items/{item_id}"; readonly id: string; readonly itemId: string }
  | { readonly route: "/v1/chat/completions" }
  | { readonly route: "/v1/completions" }
  | { readonly route: "/tokenize" }
  | { readonly route: "/detokenize" };

export type RouteLookup =
  | { readonly kind: "match"; readonly match: RouteMatch }
  | { readonly kind: "method"; readonly route: string; readonly allow: readonly string[] }
  | { readonly kind: "none" };

interface Entry {
  readonly pattern: RegExp;
  readonly route: RouteMatch["route"];
  readonly methods: readonly string[];
}

const ID = "([A-Za-z0-9_.:-]{1,200})";
/** Served model names are often `org/name`: a model id may hold slashes, raw or percent-encoded (as the SDK sends). */
const MODEL_ID = "([^?#]{1,400})";

/** Order matters: literal segments before `{id}`. */
const TABLE: readonly Entry[] = [
  { pattern: /^\/health$/, route: "/health", methods: ["GET"] },
  { pattern: /^\/metrics$/, route: "/metrics", methods: ["GET"] },
  { pattern: /^\/version$/, route: "/version", methods: ["GET"] },
  { pattern: /^\/v1\/models$/, route: "/v1/models", methods: ["GET"] },
  { pattern: new RegExp(`^/v1/models/${MODEL_ID}$`), route: "/v1/models/{id}", methods: ["GET"] },
  // GET is WebSocket mode (responses_socket.ts).
  { pattern: /^\/v1\/responses$/, route: "/v1/responses", methods: ["POST", "GET"] },
  { pattern: /^\/v1\/responses\/input_tokens$/, route: "/v1/responses/input_tokens", methods: ["POST"] },
  { pattern: /^\/v1\/responses\/compact$/, route: "/v1/responses/compact", methods: ["POST"] },
  { pattern: new RegExp(`^/v1/responses/${ID}$`), route: "/v1/responses/{id}", methods: ["GET", "DELETE"] },
  {
    pattern: new RegExp(`^/v1/responses/${ID}/input_items$`),
    route: "/v1/responses/{id}/input_items",
    methods: ["GET"],
  },
  { pattern: new RegExp(`^/v1/responses/${ID}/cancel$`), route: "/v1/responses/{id}/cancel", methods: ["POST"] },
  { pattern: /^\/v1\/conversations$/, route: "/v1/conversations", methods: ["POST"] },
  {
    pattern: new RegExp(`^/v1/conversations/${ID}$`),
    route: "/v1/conversations/{id}",
    methods: ["GET", "POST", "DELETE"],
  },
  {
    pattern: new RegExp(`^/v1/conversations/${ID}/items$`),
    route: "/v1/conversations/{id}/items",
    methods: ["GET", "POST"],
  },
  {
    pattern: new RegExp(`^/v1/conversations/${ID}/items/${ID}$`),
    route: "/v1/conversations/{id}/items/{item_id}",
    methods: ["GET", "DELETE"],
  },
  { pattern: /^\/v1\/chat\/completions$/, route: "/v1/chat/completions", methods: ["POST"] },
  { pattern: /^\/v1\/completions$/, route: "/v1/completions", methods: ["POST"] },
  { pattern: /^\/tokenize$/, route: "/tokenize", methods: ["POST"] },
  { pattern: /^\/detokenize$/, route: "/detokenize", methods: ["POST"] },
];

export function matchRoute(method: string, pathname: string): RouteLookup {
  // A trailing slash names the same resource (some clients build `${baseURL}/models/` style paths).
  const path = pathname.length > 1 && pathname.endsWith("/") ? pathname.slice(0, -1) : pathname;
  for (const entry of TABLE) {
    const m = entry.pattern.exec(path);
    if (m === null) continue;
    // HEAD is GET without the body (RFC 9110 §9.3.2); Deno.serve drops the body of a HEAD response.
    const asMethod = method === "HEAD" && entry.methods.includes("GET") ? "GET" : method;
    if (!entry.methods.includes(asMethod)) return { kind: "method", route: entry.route, allow: entry.methods };
    const id = m[1] === undefined ? undefined : decodeId(m[1]);
    const itemId = m[2] === undefined ? undefined : decodeId(m[2]);
    return {
      kind: "match",
      match: (id === undefined
        ? { route: entry.route }
        : itemId === undefined
        ? { route: entry.route, id }
        : { route: entry.route, id, itemId }) as RouteMatch,
    };
  }
  return { kind: "none" };
}

/** A malformed escape stays as sent: it names no resource, so the route answers 404 rather than failing. */
function decodeId(raw: string): string {
  try {
    return decodeURIComponent(raw);
  } catch {
    return raw;
  }
}
