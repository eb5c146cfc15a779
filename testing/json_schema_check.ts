/**
 * A small JSON-schema checker for tests: the subset rill's structured-output tests use (type, properties, required,
 * additionalProperties false, items, enum, const, minItems/maxItems, minimum/maximum, anyOf). Returns the first
 * violation as a path and reason, or undefined when the value conforms.
 */
export function schemaViolation(value: unknown, schema: unknown, path = "$"): string | undefined {
  if (schema === true || schema === undefined) return undefined;
  if (schema === false) return `${path}: no value allowed`;
  if (typeof schema !== "object" || schema === null) return `${path}: bad schema`;
  const s = schema as Record<string, unknown>;
  if (Array.isArray(s.anyOf)) {
    return s.anyOf.some((alt) => schemaViolation(value, alt, path) === undefined)
      ? undefined
      : `${path}: matches no anyOf branch`;
  }
  if (Array.isArray(s.enum) && !s.enum.some((e) => JSON.stringify(e) === JSON.stringify(value))) {
    return `${path}: ${JSON.stringify(value)} not in enum`;
  }
  if ("const" in s && JSON.stringify(s.const) !== JSON.stringify(value)) return `${path}: not the const`;
  const types = s.type === undefined ? undefined : Array.isArray(s.type) ? s.type : [s.type];
  if (types !== undefined && !types.some((t) => hasType(value, String(t)))) {
    return `${path}: ${JSON.stringify(value)} is not ${types.join("|")}`;
  }
  if (typeof value === "number") {
    if (typeof s.minimum === "number" && value < s.minimum) return `${path}: below minimum`;
    if (typeof s.maximum === "number" && value > s.maximum) return `${path}: above maximum`;
  }
  if (Array.isArray(value)) {
    if (typeof s.minItems === "number" && value.length < s.minItems) return `${path}: fewer than minItems`;
    if (typeof s.maxItems === "number" && value.length > s.maxItems) return `${path}: more than maxItems`;
    for (const [i, item] of value.entries()) {
      const bad = schemaViolation(item, s.items, `${path}[${i}]`);
      if (bad !== undefined) return bad;
    }
  }
  if (typeof value === "object" && value !== null && !Array.isArray(value)) {
    const obj = value as Record<string, unknown>;
    const props = (s.properties ?? {}) as Record<string, unknown>;
    for (const key of Array.isArray(s.required) ? s.required : []) {
      if (!(String(key) in obj)) return `${path}: missing required ${String(key)}`;
    }
    for (const [key, v] of Object.entries(obj)) {
      if (key in props) {
        const bad = schemaViolation(v, props[key], `${path}.${key}`);
        if (bad !== undefined) return bad;
      } else if (s.additionalProperties === false) return `${path}: unexpected property ${key}`;
    }
  }
  return undefined;
}

function hasType(value: unknown, type: string): boolean {
  switch (type) {
    case "object":
      return typeof value === "object" && value !== null && !Array.isArray(value);
    case "array":
      return Array.isArray(value);
    case "string":
      return typeof value === "string";
    case "integer":
      return Number.isInteger(value);
    case "number":
      return typeof value === "number";
    case "boolean":
      return typeof value === "boolean";
    case "null":
      return value === null;
    default:
      return false;
  }
}
