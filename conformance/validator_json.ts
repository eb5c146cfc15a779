/**
 * JSON-value helpers for the stream validator. The validator judges parsed wire JSON, so everything arrives as
 * `unknown`; these guards and the structural comparison are the only way it looks inside a value.
 */

/** A plain JSON object (not an array, not null). */
export type JsonRecord = Record<string, unknown>;

/** True for a JSON object (arrays and null excluded). */
export function isRecord(value: unknown): value is JsonRecord {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** True for a JSON number that is a non-negative integer (indices, counts). */
export function isIndex(value: unknown): value is number {
  return typeof value === "number" && Number.isInteger(value) && value >= 0;
}

/** True for a string with at least one character. */
export function isNonEmptyString(value: unknown): value is string {
  return typeof value === "string" && value.length > 0;
}

/**
 * The path of the first difference between two JSON values (`""` for the roots themselves), or `undefined` when
 * they are structurally equal. Key order is irrelevant, as in JSON; a missing key differs from a key set to null.
 */
export function firstDifference(a: unknown, b: unknown, path = ""): string | undefined {
  if (a === b) return undefined;
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) {
    // NaN never occurs in parsed JSON, so strict inequality of primitives is a real difference.
    return path;
  }
  const aIsArray = Array.isArray(a);
  if (aIsArray !== Array.isArray(b)) return path;
  if (aIsArray) {
    const bArray = b as unknown[];
    if (a.length !== bArray.length) return `${path}.length`;
    for (let i = 0; i < a.length; i++) {
      const d = firstDifference(a[i], bArray[i], `${path}[${i}]`);
      if (d !== undefined) return d;
    }
    return undefined;
  }
  const aRecord = a as JsonRecord;
  const bRecord = b as JsonRecord;
  for (const key in aRecord) {
    if (!Object.hasOwn(aRecord, key)) continue;
    if (!Object.hasOwn(bRecord, key)) return `${path}.${key}`;
    const d = firstDifference(aRecord[key], bRecord[key], `${path}.${key}`);
    if (d !== undefined) return d;
  }
  for (const key in bRecord) {
    if (Object.hasOwn(bRecord, key) && !Object.hasOwn(aRecord, key)) return `${path}.${key}`;
  }
  return undefined;
}

/** A short, bounded rendering of a value for violation messages. */
export function show(value: unknown): string {
  let text: string;
  try {
    text = value === undefined ? "undefined" : JSON.stringify(value);
  } catch {
    text = String(value);
  }
  return text.length > 80 ? `${text.slice(0, 77)}...` : text;
}

/** The value at a `firstDifference` path, for messages ("" is the root). */
export function valueAt(root: unknown, path: string): unknown {
  let current: unknown = root;
  for (const match of path.matchAll(/\.([^.[]+)|\[(\d+)\]/g)) {
    if (match[1] !== undefined) {
      current = isRecord(current)
        ? current[match[1]]
        : Array.isArray(current) && match[1] === "length"
        ? current.length
        : undefined;
    } else if (Array.isArray(current)) {
      current = current[Number(match[2])];
    } else {
      return undefined;
    }
  }
  return current;
}

/** The JSON type a required field must have (invariant 8). */
export type FieldKind = "index" | "string" | "stringOrNull" | "array" | "arrayOrNull" | "object" | "present";

export function hasKind(value: unknown, kind: FieldKind): boolean {
  switch (kind) {
    case "index":
      return isIndex(value);
    case "string":
      return typeof value === "string";
    case "stringOrNull":
      return value === null || typeof value === "string";
    case "array":
      return Array.isArray(value);
    case "arrayOrNull":
      return value === null || Array.isArray(value);
    case "object":
      return isRecord(value);
    case "present":
      return value !== undefined;
    default: {
      const unreachable: never = kind;
      return unreachable;
    }
  }
}

const KIND_NAMES: { readonly [K in FieldKind]: string } = {
  index: "a non-negative integer",
  string: "a string",
  stringOrNull: "a string or null",
  array: "an array",
  arrayOrNull: "an array or null",
  object: "an object",
  present: "present",
};

/** How a violation message names `kind`. */
export function kindName(kind: FieldKind): string {
  return KIND_NAMES[kind];
}
