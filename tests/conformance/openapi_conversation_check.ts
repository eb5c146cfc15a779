/**
 * Checks Conversations API objects (a conversation, a deletion, an item list and the items in it, and a Response's
 * `conversation`) against the required fields, JSON types and enumerations of the OpenAI OpenAPI document, read from
 * tests/fixtures/openapi/conversation_schema.json (its `sources` name the commit and schemas). Independent of rill's
 * own types on purpose. A message's content parts are checked too. `integer` values are also `number`s; an empty type list allows any value.
 */
import schema from "../fixtures/openapi/conversation_schema.json" with { type: "json" };

interface Spec {
  readonly required: readonly string[];
  readonly types: Readonly<Record<string, readonly string[]>>;
  readonly enums?: Readonly<Record<string, readonly unknown[]>>;
}

function jsonType(value: unknown): string[] {
  if (value === null) return ["null"];
  if (Array.isArray(value)) return ["array"];
  if (typeof value === "number") return Number.isInteger(value) ? ["integer", "number"] : ["number"];
  if (typeof value === "object") return ["object"];
  return [typeof value];
}

function objectErrors(value: unknown, spec: Spec, where: string): string[] {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return [`${where}: not an object`];
  const o = value as Record<string, unknown>;
  const errors = spec.required.filter((field) => !(field in o)).map((field) => `${where}.${field}: missing`);
  for (const [field, v] of Object.entries(o)) {
    const types = spec.types[field];
    if (types !== undefined && types.length > 0 && !jsonType(v).some((t) => types.includes(t))) {
      errors.push(`${where}.${field}: ${JSON.stringify(v)} is not ${types.join(" | ")}`);
    }
    const allowed = spec.enums?.[field];
    if (allowed !== undefined && !allowed.includes(v)) {
      errors.push(`${where}.${field}: ${JSON.stringify(v)} is not one of ${allowed.join(", ")}`);
    }
  }
  return errors;
}

const ITEMS: Readonly<Record<string, Spec>> = schema.items;
const CONTENT: Readonly<Record<string, Spec>> = schema.content;

/** A conversation item: one of the item schemas, chosen by its `type`. */
export function conversationItemErrors(item: unknown, where = "item"): string[] {
  const type = (item as { type?: unknown } | null)?.type;
  const spec = typeof type === "string" ? ITEMS[type] : undefined;
  if (spec === undefined) return [`${where}.type: ${JSON.stringify(type)} is no conversation item rill stores`];
  const errors = objectErrors(item, spec, where);
  const content = (item as { content?: unknown }).content;
  if (type === "message" && Array.isArray(content)) {
    content.forEach((part, j) => {
      const partType = (part as { type?: unknown } | null)?.type;
      const partSpec = typeof partType === "string" ? CONTENT[partType] : undefined;
      const at = `${where}.content[${j}]`;
      if (partSpec === undefined) errors.push(`${at}.type: ${JSON.stringify(partType)} is no content part rill stores`);
      else errors.push(...objectErrors(part, partSpec, at));
    });
  }
  return errors;
}

export function conversationErrors(value: unknown, where = "conversation"): string[] {
  return objectErrors(value, schema.conversation, where);
}

export function conversationDeletedErrors(value: unknown, where = "deleted"): string[] {
  return objectErrors(value, schema.deleted, where);
}

/** The list and every item in it. */
export function itemListErrors(value: unknown, where = "list"): string[] {
  const errors = objectErrors(value, schema.item_list, where);
  const data = (value as { data?: unknown } | null)?.data;
  if (Array.isArray(data)) {
    data.forEach((item, i) => errors.push(...conversationItemErrors(item, `${where}.data[${i}]`)));
  }
  return errors;
}

/** A Response's `conversation`: absent, null, or `{id}`. */
export function responseConversationErrors(response: Record<string, unknown>, where = "response"): string[] {
  if (!("conversation" in response) || response.conversation === null) return [];
  return objectErrors(response.conversation, schema.response_conversation, `${where}.conversation`);
}
