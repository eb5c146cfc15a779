/**
 * The store's database cannot be reached (PostgreSQL stopped, restarting, or the network to it down). A request that
 * needs the store is answered 503 with `Retry-After`, never 500 and never held: the client retries, on this replica
 * or another, once the database is back. rill reconnects by itself.
 */
import { ApiError } from "../../prompt/errors.ts";

/** Seconds a client should wait before retrying. */
const RETRY_AFTER_SECONDS = 1;

export class StoreUnavailableError extends ApiError {
  constructor(cause?: unknown) {
    super({
      status: 503,
      type: "server_error",
      message: "The response store's database is unreachable; retry the request",
      code: "store_unavailable",
      headers: { "retry-after": String(RETRY_AFTER_SECONDS) },
    });
    if (cause !== undefined) this.cause = cause;
  }
}

/** Error codes of the `postgres` client and of the system for a connection that failed or broke. */
const CONNECTION_CODES = new Set([
  "CONNECTION_CLOSED",
  "CONNECTION_ENDED",
  "CONNECTION_DESTROYED",
  "CONNECT_TIMEOUT",
  "ECONNREFUSED",
  "ECONNRESET",
  "ECONNABORTED",
  "EPIPE",
  "ETIMEDOUT",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ENOTFOUND",
  "EAI_AGAIN",
]);

/**
 * Whether `error` means the database could not be reached (rather than refusing the statement): a client or socket
 * error, or a PostgreSQL error of class 08 (connection exception), 57P01-57P03 (shutting down, cannot connect now)
 * or 53300 (too many connections).
 */
export function isConnectionError(error: unknown): boolean {
  if (error instanceof StoreUnavailableError) return true;
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code !== "string") return false;
  return CONNECTION_CODES.has(code) || code.startsWith("08") || /^57P0[123]$/.test(code) || code === "53300";
}
