/**
 * Checks the shapes inside Responses API responses and streams (output items, their content parts and logprobs,
 * every streamed event type), the compaction response, and Chat Completions / legacy Completions objects and chunks
 * against the required fields and JSON types of the OpenAI OpenAPI document, read from
 * tests/fixtures/openapi/shape_schema.json (its `sources` name the repository, commit and schemas). Independent of
 * rill's own types on purpose; the top-level `Response` is checked by openapi_response_check.ts.
 *
 * Rules: every required field is present; a present field the schema names has one of its types (`integer` values
 * are also `number`s); an output item, content part or event type the fixture has no schema for is an error, so a
 * new shape cannot slip past unchecked.
 */
import schema from "../fixtures/openapi/shape_schema.json" with { type: "json" };
import { responseSchemaErrors } from "./openapi_response_check.ts";

type Spec = { readonly required: readonly string[]; readonly types: Readonly<Record<string, readonly string[]>> };
type Json = Record<string, unknown>;

const SHAPES = schema.shapes as Readonly<Record<string, Spec>>;
const table = (t: Readonly<Record<string, string>>): ReadonlyMap<string, string> => new Map(Object.entries(t));
const ITEMS = table(schema.output_items);
const PARTS = table(schema.content_parts);
const EVENTS = table(schema.events);
const MESSAGES = table(schema.message_by_role);

function jsonType(value: unknown): string[] {
  if (value === null) return ["null"];
  if (Array.isArray(value)) return ["array"];
  if (typeof value === "number") return Number.isInteger(value) ? ["integer", "number"] : ["number"];
  if (typeof value === "object") return ["object"];
  return [typeof value];
}

function isObject(value: unknown): value is Json {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** The errors of `value` against the named shape's required fields and types (not its nested shapes). */
export function shapeErrors(name: string, value: unknown, where: string): string[] {
  const spec = SHAPES[name];
  if (spec === undefined) throw new Error(`no shape ${name} in the fixture`);
  if (!isObject(value)) return [`${where}: not an object`];
  const errors = spec.required.filter((f) => !(f in value)).map((f) => `${where}.${f}: missing`);
  for (const [field, v] of Object.entries(value)) {
    const types = spec.types[field];
    if (types !== undefined && !jsonType(v).some((t) => types.includes(t))) {
      errors.push(`${where}.${field}: ${JSON.stringify(v)} is not ${types.join(" | ")}`);
    }
  }
  return errors;
}

/** Each element of `value[field]` (when an array) checked by `check`. */
function each(value: Json, field: string, where: string, check: (x: unknown, at: string) => string[]): string[] {
  const list = value[field];
  return Array.isArray(list) ? list.flatMap((x, i) => check(x, `${where}.${field}[${i}]`)) : [];
}

function logprobErrors(value: unknown, where: string): string[] {
  const errors = shapeErrors("LogProb", value, where);
  return isObject(value)
    ? [...errors, ...each(value, "top_logprobs", where, (x, at) => shapeErrors("TopLogProb", x, at))]
    : errors;
}

/** A message's or event's content part, by its `type`. */
export function contentPartErrors(part: unknown, where: string): string[] {
  if (!isObject(part)) return [`${where}: not an object`];
  const name = PARTS.get(String(part["type"]));
  if (name === undefined) return [`${where}.type: no schema for content part ${JSON.stringify(part["type"])}`];
  return [...shapeErrors(name, part, where), ...each(part, "logprobs", where, logprobErrors)];
}

/** One output item (of a Response, an output_item event or a compaction), by its `type` (and a message's role). */
export function outputItemErrors(item: unknown, where: string): string[] {
  if (!isObject(item)) return [`${where}: not an object`];
  const type = String(item["type"]);
  if (type === "message") {
    const name = MESSAGES.get(String(item["role"]));
    if (name === undefined) return [`${where}.role: no schema for message role ${JSON.stringify(item["role"])}`];
    const errors = shapeErrors(name, item, where);
    return name === "OutputMessage" ? [...errors, ...each(item, "content", where, contentPartErrors)] : errors;
  }
  const name = ITEMS.get(type);
  if (name === undefined) return [`${where}.type: no schema for output item ${JSON.stringify(item["type"])}`];
  const errors = shapeErrors(name, item, where);
  if (type !== "reasoning") return errors;
  return [
    ...errors,
    ...each(item, "summary", where, (x, at) => shapeErrors("ReasoningSummaryPart", x, at)),
    ...each(item, "content", where, (x, at) => shapeErrors("ReasoningTextPart", x, at)),
  ];
}

/** A whole Response: the top-level object (openapi_response_check.ts), its usage and every output item. */
export function fullResponseErrors(response: unknown, where = "response"): string[] {
  const errors = responseSchemaErrors(response, where);
  if (!isObject(response)) return errors;
  const usage = response["usage"];
  if (usage !== null && usage !== undefined) errors.push(...shapeErrors("ResponseUsage", usage, `${where}.usage`));
  return [...errors, ...each(response, "output", where, outputItemErrors)];
}

/** One streamed Responses event (SSE or WebSocket), by its `type`, with the shapes it carries. */
export function streamEventErrors(event: unknown): string[] {
  if (!isObject(event)) return ["event: not an object"];
  const type = String(event["type"]);
  const name = EVENTS.get(type);
  if (name === undefined) return [`${type}: no schema for this event type`];
  const errors = shapeErrors(name, event, type);
  if ("response" in event) errors.push(...fullResponseErrors(event["response"], `${type}.response`));
  if ("item" in event) errors.push(...outputItemErrors(event["item"], `${type}.item`));
  if ("part" in event) {
    errors.push(
      ...(type.startsWith("response.reasoning_summary_part.")
        ? shapeErrors("ReasoningSummaryPart", event["part"], `${type}.part`)
        : contentPartErrors(event["part"], `${type}.part`)),
    );
  }
  return [...errors, ...each(event, "logprobs", type, logprobErrors)];
}

/**
 * One WebSocket-mode message: a message refused before its response started is the spec's `ResponseWsError`
 * (`{type: "error", status, error: {type, code, message, param}}`); everything else is a stream event as over SSE.
 */
export function socketEventErrors(event: unknown): string[] {
  if (!isObject(event) || event["type"] !== "error" || !("error" in event)) return streamEventErrors(event);
  const errors = shapeErrors("ResponseWsError", event, "error");
  return [...errors, ...shapeErrors("ErrorPayload", event["error"], "error.error")];
}

/** The `POST /v1/responses/compact` answer and its output items. */
export function compactionResponseErrors(value: unknown, where = "compaction"): string[] {
  const errors = shapeErrors("CompactResource", value, where);
  if (!isObject(value)) return errors;
  if (isObject(value["usage"])) errors.push(...shapeErrors("ResponseUsage", value["usage"], `${where}.usage`));
  return [...errors, ...each(value, "output", where, outputItemErrors)];
}

function chatLogprobErrors(value: unknown, where: string): string[] {
  if (!isObject(value)) return [];
  const tokens = (x: unknown, at: string) => {
    const errors = shapeErrors("ChatCompletionTokenLogprob", x, at);
    return isObject(x)
      ? [...errors, ...each(x, "top_logprobs", at, (y, a) => shapeErrors("TopLogProb", y, a))]
      : errors;
  };
  return [...each(value, "content", where, tokens), ...each(value, "refusal", where, tokens)];
}

/** A Chat Completion (`object: "chat.completion"`), every choice, message, tool call and logprob. */
export function chatCompletionErrors(value: unknown, where = "chat.completion"): string[] {
  const errors = shapeErrors("CreateChatCompletionResponse", value, where);
  if (!isObject(value)) return errors;
  if (value["usage"] !== undefined) errors.push(...shapeErrors("CompletionUsage", value["usage"], `${where}.usage`));
  return [
    ...errors,
    ...each(value, "choices", where, (choice, at) => {
      const e = shapeErrors("ChatCompletionChoice", choice, at);
      if (!isObject(choice)) return e;
      const message = choice["message"];
      e.push(...shapeErrors("ChatCompletionResponseMessage", message, `${at}.message`));
      if (isObject(message)) {
        e.push(
          ...each(message, "tool_calls", `${at}.message`, (x, a) => shapeErrors("ChatCompletionMessageToolCall", x, a)),
        );
      }
      return [...e, ...chatLogprobErrors(choice["logprobs"], `${at}.logprobs`)];
    }),
  ];
}

/** A Chat Completion chunk (`object: "chat.completion.chunk"`), every choice, delta and tool call chunk. */
export function chatChunkErrors(value: unknown, where = "chat.completion.chunk"): string[] {
  const errors = shapeErrors("CreateChatCompletionStreamResponse", value, where);
  if (!isObject(value)) return errors;
  if (isObject(value["usage"])) errors.push(...shapeErrors("CompletionUsage", value["usage"], `${where}.usage`));
  return [
    ...errors,
    ...each(value, "choices", where, (choice, at) => {
      const e = shapeErrors("ChatCompletionStreamChoice", choice, at);
      if (!isObject(choice)) return e;
      const delta = choice["delta"];
      e.push(...shapeErrors("ChatCompletionStreamResponseDelta", delta, `${at}.delta`));
      if (isObject(delta)) {
        e.push(
          ...each(
            delta,
            "tool_calls",
            `${at}.delta`,
            (x, a) => shapeErrors("ChatCompletionMessageToolCallChunk", x, a),
          ),
        );
      }
      return [...e, ...chatLogprobErrors(choice["logprobs"], `${at}.logprobs`)];
    }),
  ];
}

/** A legacy Completion (`object: "text_completion"`), streamed chunk or whole, and every choice. */
export function completionErrors(value: unknown, where = "text_completion"): string[] {
  const errors = shapeErrors("CreateCompletionResponse", value, where);
  if (!isObject(value)) return errors;
  if (isObject(value["usage"])) errors.push(...shapeErrors("CompletionUsage", value["usage"], `${where}.usage`));
  return [...errors, ...each(value, "choices", where, (x, at) => shapeErrors("CompletionChoice", x, at))];
}

/**
 * A streamed legacy Completion chunk. The spec has no chunk schema (streams are documented as CreateCompletionResponse
 * objects), yet a chunk before a choice's end cannot have a finish reason, nor usage before the last: those two may be
 * null, as in the Chat Completions chunk schema; everything else is checked as a whole Completion.
 */
export function completionChunkErrors(value: unknown, where = "text_completion"): string[] {
  if (!isObject(value)) return [`${where}: not an object`];
  const choices = Array.isArray(value["choices"])
    ? value["choices"].map((c) => isObject(c) && c["finish_reason"] === null ? { ...c, finish_reason: "stop" } : c)
    : value["choices"];
  const { usage, ...rest } = value;
  return completionErrors({ ...rest, choices, ...(usage === null ? {} : { usage }) }, where);
}
