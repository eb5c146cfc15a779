/**
 * The `x-request-id` of a request: the client's own when it sends one (only letters, digits and `._:-` kept, at most
 * 128 characters, so a log line or header can carry nothing else), otherwise a fresh UUID. It is echoed on the response
 * and logged with the request.
 */

export const MAX_REQUEST_ID = 128;

export function requestId(request: Request): string {
  const sent = request.headers.get("x-request-id");
  const clean = sent === null ? "" : sent.replace(/[^A-Za-z0-9._:-]/g, "").slice(0, MAX_REQUEST_ID);
  return clean === "" ? crypto.randomUUID() : clean;
}
