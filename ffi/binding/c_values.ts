/** Values crossing the FFI boundary: C strings both ways and the addresses of typed arrays. */

/** The NUL-terminated string at `ptr`; "" for NULL. */
export function cString(ptr: Deno.PointerValue): string {
  return ptr === null ? "" : Deno.UnsafePointerView.getCString(ptr);
}

/** `s` as UTF-8 bytes with a NUL after them. */
export function nulTerminated(s: string): Uint8Array<ArrayBuffer> {
  const bytes = new TextEncoder().encode(s);
  const out = new Uint8Array(bytes.length + 1);
  out.set(bytes);
  return out;
}

/** The address of a typed array's first element, its backing store pinned off the V8 heap; 0 when empty. */
export function address(array: ArrayBufferView): bigint {
  void array.buffer;
  if (array.byteLength === 0) return 0n;
  const ptr = Deno.UnsafePointer.of(array as BufferSource);
  return ptr === null ? 0n : BigInt(Deno.UnsafePointer.value(ptr));
}
