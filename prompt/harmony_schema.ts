/**
 * JSON Schema → the TypeScript-like type harmony writes for a function tool's parameters (harmony.md §1.6).
 *
 * The output must be byte-identical to openai/harmony's renderer, because the model was trained on exactly that text;
 * the quirks (a nested object's description written twice, arrays keeping the parent indent, enum string defaults
 * unquoted inside objects but JSON-quoted in a top-level `oneOf`) are therefore reproduced, not fixed.
 */

type Schema = Record<string, unknown>;

function isSchema(value: unknown): value is Schema {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function isEnum(schema: Schema): boolean {
  return Array.isArray(schema.enum) && schema.enum.length > 0;
}

function isNullable(schema: Schema): boolean {
  return schema.nullable === true;
}

function withNullable(schema: Schema, type: string): string {
  return isNullable(schema) && !type.includes("null") ? `${type} | null` : type;
}

/** `default: …` as written next to object properties and their `oneOf` variants. */
function propertyDefault(schema: Schema, value: unknown): string {
  if (typeof value === "string") return isEnum(schema) ? `default: ${value}` : `default: "${value}"`;
  return `default: ${JSON.stringify(value)}`;
}

/** `default: …` as written after a top-level `oneOf` variant (a string on an enum keeps its JSON quotes there). */
function variantDefault(schema: Schema, value: unknown): string {
  if (typeof value === "string" && !isEnum(schema)) return `default: "${value}"`;
  return `default: ${JSON.stringify(value)}`;
}

function description(schema: Schema): string | undefined {
  return typeof schema.description === "string" ? schema.description : undefined;
}

function oneOfVariants(schema: Schema): unknown[] | undefined {
  return Array.isArray(schema.oneOf) ? schema.oneOf : undefined;
}

function renderTopLevelOneOf(variants: readonly unknown[], indent: string): string {
  let out = "";
  for (const variant of variants) {
    const v = isSchema(variant) ? variant : {};
    out += `\n${indent} | ${withNullable(v, harmonyTypeScript(v, `${indent}   `))}`;
    const comments: string[] = [];
    const desc = description(v);
    if (desc !== undefined) comments.push(desc);
    if ("default" in v) comments.push(variantDefault(v, v.default));
    if (comments.length > 0) out += ` // ${comments.join(" ")}`;
  }
  return out;
}

function renderOneOfProperty(
  key: string,
  prop: Schema,
  variants: readonly unknown[],
  optional: string,
  indent: string,
): string {
  let out = "";
  const propDesc = description(prop);
  const first = variants[0];
  const firstDesc = isSchema(first) ? description(first) : undefined;
  const descAbove = propDesc !== undefined && propDesc !== firstDesc;
  if (descAbove) out += `${indent}// ${propDesc}\n`;
  if ("default" in prop) out += `${indent}// ${propertyDefault(prop, prop.default)}\n`;
  out += `${indent}${key}${optional}:\n`;
  variants.forEach((variant, i) => {
    const v = isSchema(variant) ? variant : {};
    out += `${indent} | ${withNullable(v, harmonyTypeScript(v, `${indent}   `))}`;
    const comments: string[] = [];
    const desc = description(v);
    if (!(i === 0 && descAbove) && desc !== undefined && desc !== propDesc) comments.push(desc);
    if ("default" in v) comments.push(propertyDefault(v, v.default));
    if (comments.length > 0) out += ` // ${comments.join(" ")}`;
    out += "\n";
  });
  return out + `${indent},\n`;
}

function renderObject(schema: Schema, indent: string): string {
  let out = "";
  const desc = description(schema);
  if (desc !== undefined) out += `${indent}// ${desc}\n`;
  out += "{\n";
  const props = isSchema(schema.properties) ? schema.properties : {};
  const required = new Set(Array.isArray(schema.required) ? schema.required.filter((r) => typeof r === "string") : []);
  for (const [key, value] of Object.entries(props)) {
    const prop = isSchema(value) ? value : {};
    const optional = required.has(key) ? "" : "?";
    if (typeof prop.title === "string") out += `${indent}// ${prop.title}\n${indent}//\n`;
    const variants = oneOfVariants(prop);
    if (variants === undefined) {
      const propDesc = description(prop);
      if (propDesc !== undefined) out += `${indent}// ${propDesc}\n`;
    }
    if (Array.isArray(prop.examples) && prop.examples.length > 0) {
      out += `${indent}// Examples:\n`;
      for (const example of prop.examples) {
        if (typeof example === "string") out += `${indent}// - "${example}"\n`;
      }
    }
    if (variants !== undefined) {
      out += renderOneOfProperty(key, prop, variants, optional, indent);
      continue;
    }
    out += `${indent}${key}${optional}: ${withNullable(prop, harmonyTypeScript(prop, `${indent}    `))},`;
    if ("default" in prop) out += ` // ${propertyDefault(prop, prop.default)}`;
    out += "\n";
  }
  return out + `${indent}}`;
}

/** The type text for `schema`; `indent` is the prefix of nested lines (harmony starts with ""). */
export function harmonyTypeScript(schema: Schema, indent = ""): string {
  const variants = oneOfVariants(schema);
  if (variants !== undefined) return renderTopLevelOneOf(variants, indent);
  if (Array.isArray(schema.type)) {
    const types = schema.type.filter((t) => typeof t === "string").map((t) => t === "integer" ? "number" : t);
    if (types.length > 0) return types.join(" | ");
  }
  switch (schema.type) {
    case "object":
      return renderObject(schema, indent);
    case "string": {
      const members = Array.isArray(schema.enum) ? schema.enum.filter((e) => typeof e === "string") : [];
      return members.length > 0 ? members.map((m) => `"${m}"`).join(" | ") : "string";
    }
    case "number":
    case "integer":
      return "number";
    case "boolean":
      return "boolean";
    case "array":
      if (!("items" in schema)) return "Array<any>";
      return `${harmonyTypeScript(isSchema(schema.items) ? schema.items : {}, indent)}[]`;
    default:
      return "any";
  }
}
