/**
 * The `postgres` client batches small writes with `setImmediate` and cancels that timer when its socket closes;
 * under Deno the already queued callback can still run, and it then throws `Cannot read properties of null (reading
 * 'write')` from the client's connection module, outside any promise, which would end the process. By then the close
 * has failed every query sent on that connection (a StoreUnavailableError for the requests waiting on them) and the
 * client opens a new connection for the next query, so that one throw carries nothing to report: it is stopped here.
 * Every other uncaught error is left alone.
 */
let installed = false;

/** Whether `error` is that throw: a TypeError reading `write` of null, from the client's connection.js. */
export function isClosedSocketWrite(error: unknown): boolean {
  return error instanceof TypeError && /reading 'write'/.test(error.message) &&
    /\/postgres\/src\/connection\.js/.test(error.stack ?? "");
}

/** Installs the process-wide filter once. */
export function guardPostgresClient(): void {
  if (installed) return;
  installed = true;
  globalThis.addEventListener("error", (event) => {
    if (isClosedSocketWrite(event.error)) event.preventDefault();
  });
}
