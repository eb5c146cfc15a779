/**
 * Checks a Responses API `Response` object (and a lifecycle event carrying one) against the required fields and JSON
 * types of the published specifications, read from tests/fixtures/openapi/response_schema.json (its `sources` name
 * the repositories, commits and schemas it was taken from). Independent of rill's own types on purpose.
 *
 * Rules: every field either spec requires is present; a present field's type is one that every spec requiring the
 * field allows (or, for a field no spec requires, one some spec allows); function tools carry their required fields.
 * `integer` values are also `number`s.
 */
import schema from "../fixtures/openapi/response_schema.json" with { type: "json" };

type Spec = { readonly required: readonly string[]; readonly types: Readonly<Record<string, readonly string[]>> };

const SPECS: readonly Spec[] = [schema.response.open_responses, schema.response.openai];

function jsonType(value: unknown): string[] {
  if (value === null) return ["null"];
  if (Array.isArray(value)) return ["array"];
  if (typeof value === "number") return Number.isInteger(value) ? ["integer", "number"] : ["number"];
  if (typeof value === "object") return ["object"];
  return [typeof value];
}

/** The type lists a field's value must each match: those of the specs requiring it, else of any spec having it. */
function typeRules(field: string): (readonly string[])[] {
  const having = SPECS.filter((s) => s.types[field] !== undefined);
  const requiring = having.filter((s) => s.required.includes(field));
  if (requiring.length > 0) return requiring.map((s) => s.types[field]!);
  return having.length === 0 ? [] : [[...new Set(having.flatMap((s) => s.types[field]!))]];
}

/** Every way `response` departs from the specs ("" prefixes name where). Empty when it conforms. */
export function responseSchemaErrors(response: unknown, where = "response"): string[] {
  const errors: string[] = [];
  if (typeof response !== "object" || response === null || Array.isArray(response)) return [`${where}: not an object`];
  const r = response as Record<string, unknown>;
  for (const spec of SPECS) {
    for (const field of spec.required) {
      if (!(field in r)) errors.push(`${where}.${field}: missing`);
    }
  }
  for (const [field, value] of Object.entries(r)) {
    for (const types of typeRules(field)) {
      if (!jsonType(value).some((t) => types.includes(t))) {
        errors.push(`${where}.${field}: ${JSON.stringify(value)} is not ${types.join(" | ")}`);
        break;
      }
    }
  }
  const tools = Array.isArray(r["tools"]) ? r["tools"] as unknown[] : [];
  tools.forEach((tool, i) => {
    if (typeof tool !== "object" || tool === null || (tool as { type?: unknown }).type !== "function") return;
    const t = tool as Record<string, unknown>;
    const ft = schema.function_tool as Spec;
    for (const field of ft.required) if (!(field in t)) errors.push(`${where}.tools[${i}].${field}: missing`);
    for (const [field, value] of Object.entries(t)) {
      const types = ft.types[field];
      if (types !== undefined && !jsonType(value).some((x) => types.includes(x))) {
        errors.push(`${where}.tools[${i}].${field}: ${JSON.stringify(value)} is not ${types.join(" | ")}`);
      }
    }
  });
  return errors;
}

const LIFECYCLE: ReadonlySet<string> = new Set(schema.lifecycle_event.types);

/** The errors of one streamed event: lifecycle events must carry the event's required fields and a valid response. */
export function eventSchemaErrors(event: Record<string, unknown>): string[] {
  const type = String(event["type"]);
  if (!LIFECYCLE.has(type)) return [];
  const errors = schema.lifecycle_event.required.filter((f) => !(f in event)).map((f) => `${type}.${f}: missing`);
  return [...errors, ...responseSchemaErrors(event["response"], `${type}.response`)];
}

/** The event types that carry a whole Response. */
export function isLifecycleEvent(type: string): boolean {
  return LIFECYCLE.has(type);
}
