/**
 * Runs `body` now and wraps its result (or its throw) in a promise: the SQLite store's work is synchronous, and its
 * writes must take effect in call order, before the caller's next statement, as the interface's promises promise.
 */
export function syncPromise<T>(body: () => T): Promise<T> {
  try {
    return Promise.resolve(body());
  } catch (error) {
    return Promise.reject(error);
  }
}
