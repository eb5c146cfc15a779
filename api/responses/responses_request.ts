/**
 * A validated `POST /v1/responses` body → everything one generation needs: the conversation (PromptInput), its
 * prompt tokens, SamplingParams, the ResponseTemplate the Response object echoes, and what the store keeps.
 *
 * What "honour" means per field (anything else of the spec is a 400 naming the param):
 * - `input`: messages, function calls and outputs, reasoning, and compaction items (their sealed summary, as a user
 *   message) become the conversation; hosted-tool call items
 *   rill's parsers emit (web_search_call, code_interpreter_call, mcp_call) are accepted when replayed but add nothing
 *   to the prompt (no result exists for them). An `item_reference` stands for the stored item with that id (an
 *   output or input item of a stored response; 404 when none has it). Images, files and other item types are
 *   rejected.
 * - `conversation` (an id or `{id}`): the Conversations API conversation's items come before `input` (404 naming
 *   `conversation` when it does not exist; 400 together with `previous_response_id`); an input item repeating an id
 *   the conversation holds is a 400. The turn is appended when the response ends (responses_service.ts).
 * - `tools`: function tools are offered to the model. Hosted/non-function tool types (`web_search`, `custom`,
 *   `local_shell`, `namespace`, …) are accepted and echoed but never offered: rill runs no hosted tools.
 * - `tool_choice`: none/auto/required/{type:function,name} go to the chat format; `allowed_tools` restricts the offered
 *   function tools and uses its `mode`. Hosted-tool choices are rejected.
 * - `reasoning.effort`: none/minimal → low, xhigh/max → high (the nearest level a harmony model has).
 *   `reasoning.summary` is accepted: rill streams the raw reasoning as `reasoning_text` and writes no summaries.
 * - `include`: `message.output_text.logprobs` turns logprobs on (with `top_logprobs` alternatives);
 *   `reasoning.encrypted_content` adds to each reasoning item its text sealed under the server key
 *   (reasoning_seal.ts), besides the clear `content`. Input reasoning items with `encrypted_content` are rendered
 *   from the opened blob, compaction items from their sealed summary (sealed_items.ts); a blob that does not verify
 *   is a 400 naming it. Other include values are rejected.
 * - `text.verbosity`, `prompt_cache_key`, `prompt_cache_retention: in_memory`, `safety_identifier`, `user`,
 *   `client_metadata` are hints that hold trivially; they are accepted (and echoed where the Response has the
 *   field). `max_tool_calls` caps the tool calls of the response, and `parallel_tool_calls: false` ends the turn
 *   after the first call (parallel_tool_calls.ts).
 * - `presence_penalty`, `frequency_penalty` are applied (over the generated tokens) and echoed.
 * - `truncation: "auto"` drops the oldest conversation messages until the prompt fits; `disabled` (default) answers
 *   400 `context_length_exceeded` when the prompt leaves no room to generate.
 */
import type { FunctionTool, PromptInput, ToolChoice } from "../../prompt/conversation.ts";
import type { Tokenizer } from "../../checkpoint/tokenizer.ts";
import type { ChatFormat } from "../../prompt/chat_format.ts";
import type { SamplingParams } from "../../engine/engine.ts";
import type { ResponseTemplate } from "../../events/pipeline.ts";
import type { IdPrefix } from "../../events/ids.ts";
import { invalidRequest, modelNotFound, notFound, unsupportedParameter } from "../../prompt/errors.ts";
import { samplerTopP, type SamplingDefaults } from "../sampling_defaults.ts";
import { itemsToMessages } from "./conversation_items.ts";
import { openSealedItems } from "./sealed_items.ts";
import type { ReasoningSeal } from "./reasoning_seal.ts";
import { parallelToolCallLimit, type ToolCallLimit } from "../../prompt/parallel_tool_calls.ts";
import { normalizeTools } from "../../prompt/normalize_tools.ts";
import { fitPrompt } from "../../prompt/prompt_fit.ts";
import { LoopYielder } from "../../prompt/loop_yield.ts";
import { declaredHostedTools, type HostedTools, NO_HOSTED_TOOLS } from "../../parsers/hosted_tools.ts";
import {
  grammarForcesChoice,
  responsesTextFormat,
  type StructuredRequest,
  structuredRequest,
} from "../../prompt/structured_output.ts";
import {
  type CreateResponseBody,
  type FunctionToolInput,
  type InputItem,
  type InputTokensBody,
  parseInputItem,
  parseTool,
} from "./responses_schema.ts";

/**
 * What the store keeps to continue a conversation. Version 2 (what requests store): this response's own input items
 * and the response it continues; the store rebuilds the history by walking that chain. Version 1: every item
 * before this response's output, in order (what `previous` lookups return).
 */
export type StoredConversation =
  | { readonly version: 1; readonly items: readonly Record<string, unknown>[] }
  | { readonly version: 2; readonly previous: string | null; readonly items: readonly Record<string, unknown>[] };

/** Looks up a stored response for `previous_response_id`. */
export type PreviousLookup = (
  id: string,
) => Promise<{ response: Record<string, unknown>; conversation: unknown } | undefined>;

/** Looks up a stored item by id, for `item_reference`. */
export type ItemLookup = (id: string) => Promise<Record<string, unknown> | undefined>;

/** Sampling defaults of the served model (its generation_config.json). */
export interface RequestContext {
  readonly format: ChatFormat;
  readonly tokenizer: Tokenizer;
  readonly modelId: string;
  readonly maxModelLen: number;
  readonly defaults: SamplingDefaults;
  readonly previous: PreviousLookup;
  readonly item: ItemLookup;
  /** A conversation's items, oldest first; undefined for an unknown conversation. */
  readonly conversationItems: (id: string) => Promise<Record<string, unknown>[] | undefined>;
  /** True when the served model can decode under a grammar (structured outputs, strict tools). */
  readonly constrainedDecoding: boolean;
  readonly newId: (prefix: Extract<IdPrefix, "resp" | "msg" | "fco" | "fc" | "rs" | "cmp">) => string;
  /** Seals and opens `encrypted_content` under the server key, bound to this model. */
  readonly seal: ReasoningSeal;
  readonly now: () => number;
}

export interface PreparedPrompt {
  readonly prompt: PromptInput;
  readonly promptTokens: number[];
  readonly toolNames: readonly string[];
  /** Hosted tools the request declared: calls to them parse as their items, calls to others as text. */
  readonly hostedTools: HostedTools;
  /** This request's own input items, normalised to wire form with ids (for `input_items`). */
  readonly inputItems: Record<string, unknown>[];
  /** The whole conversation as typed items (earlier responses', then this request's), sealed content opened. */
  readonly items: readonly InputItem[];
  readonly conversation: StoredConversation;
  /** The Conversations API conversation the response belongs to (`conversation`), if any. */
  readonly conversationId?: string;
  /** What the output is constrained to (text.format, strict or forced tools); undefined when nothing is. */
  readonly structured?: StructuredRequest;
}

export interface PreparedResponse extends PreparedPrompt {
  readonly sampling: SamplingParams;
  readonly template: ResponseTemplate;
  readonly includeLogprobs: boolean;
  /** include `reasoning.encrypted_content`: reasoning items carry their sealed text. */
  readonly sealReasoning: boolean;
  readonly stream: boolean;
  readonly background: boolean;
  readonly store: boolean;
  /** How many tool calls the response may make (`parallel_tool_calls: false`: one). */
  readonly toolCallLimit: ToolCallLimit;
}

const EFFORT: Record<string, "low" | "medium" | "high"> = {
  none: "low",
  minimal: "low",
  low: "low",
  medium: "medium",
  high: "high",
  xhigh: "high",
  max: "high",
};

function checkUnsupported(body: CreateResponseBody | InputTokensBody): void {
  if (body.conversation != null && body.previous_response_id != null) {
    throw invalidRequest("'previous_response_id' cannot be used together with 'conversation'", "conversation");
  }
  if (body.reasoning?.mode != null) throw unsupportedParameter("reasoning.mode", "'reasoning.mode' is not supported");
  // rill's formats keep only the current tool loop's reasoning in the prompt (harmony's rule): "auto" and
  // "current_turn" are that; keeping every earlier turn's reasoning is not something they can render.
  if (body.reasoning?.context === "all_turns") {
    throw unsupportedParameter("reasoning.context", "'reasoning.context: all_turns' is not supported by rill");
  }
}

function checkUnsupportedCreate(body: CreateResponseBody): void {
  checkUnsupported(body);
  for (const key of ["prompt", "context_management", "moderation", "prompt_cache_options"] as const) {
    if (body[key] != null) throw unsupportedParameter(key, `'${key}' is not supported by rill`);
  }
  if (body.service_tier != null && body.service_tier !== "auto" && body.service_tier !== "default") {
    throw unsupportedParameter(
      "service_tier",
      `Service tier '${body.service_tier}' is not available; use auto or default`,
    );
  }
  if (body.prompt_cache_retention === "24h") {
    throw unsupportedParameter("prompt_cache_retention", "rill keeps its prefix cache in memory only");
  }
  body.include?.forEach((value, i) => {
    if (value !== "message.output_text.logprobs" && value !== "reasoning.encrypted_content") {
      throw unsupportedParameter(`include[${i}]`, `include value '${value}' is not supported by rill`);
    }
  });
  if (body.stream_options != null && body.stream !== true) {
    throw invalidRequest("'stream_options' is only allowed when 'stream' is true", "stream_options");
  }
  if (body.background === true && body.store === false) {
    throw invalidRequest(
      "Background responses must be stored: 'background: true' requires 'store' to be true",
      "background",
    );
  }
}

interface ToolSetup {
  readonly offered: FunctionTool[];
  readonly choice: ToolChoice;
}

function toFunctionTool(tool: FunctionToolInput): FunctionTool {
  return {
    name: tool.name,
    ...(tool.description == null ? {} : { description: tool.description }),
    ...(tool.parameters == null ? {} : { parameters: tool.parameters }),
    ...(tool.strict == null ? {} : { strict: tool.strict }),
  };
}

function setupTools(body: CreateResponseBody | InputTokensBody): ToolSetup {
  const functions: FunctionTool[] = [];
  const seen = new Set<string>();
  (body.tools ?? []).forEach((raw, i) => {
    const tool = parseTool(raw, ["tools", i]);
    if (tool.kind !== "function") return;
    if (seen.has(tool.tool.name)) {
      throw invalidRequest(`Duplicate function tool name '${tool.tool.name}'`, `tools[${i}].name`, "invalid_value");
    }
    seen.add(tool.tool.name);
    functions.push(toFunctionTool(tool.tool));
  });
  const raw = body.tool_choice ?? "auto";
  if (typeof raw === "string") {
    if (raw === "required" && functions.length === 0) {
      throw invalidRequest("tool_choice 'required' needs at least one function tool in 'tools'", "tool_choice");
    }
    return { offered: functions, choice: raw };
  }
  switch (raw.type) {
    case "function": {
      const name = (raw as { name?: unknown }).name;
      if (typeof name !== "string" || !seen.has(name)) {
        throw invalidRequest(
          `Tool choice function ${JSON.stringify(name)} is not among the function tools`,
          "tool_choice.name",
        );
      }
      return { offered: functions, choice: { type: "function", name } };
    }
    case "allowed_tools": {
      const mode = (raw as { mode?: unknown }).mode;
      const allowed = (raw as { tools?: unknown }).tools;
      if (mode !== "auto" && mode !== "required") {
        throw invalidRequest("allowed_tools.mode must be 'auto' or 'required'", "tool_choice.mode", "invalid_value");
      }
      if (!Array.isArray(allowed)) throw invalidRequest("allowed_tools.tools must be an array", "tool_choice.tools");
      const names = new Set<string>();
      allowed.forEach((entry, i) => {
        const t = entry as { type?: unknown; name?: unknown } | null;
        if (t?.type === "function") {
          if (typeof t.name !== "string" || !seen.has(t.name)) {
            throw invalidRequest(
              `Allowed tool ${JSON.stringify(t.name)} is not among the function tools`,
              `tool_choice.tools[${i}].name`,
            );
          }
          names.add(t.name);
        } else if (typeof t?.type !== "string") {
          throw invalidRequest("Each allowed tool needs a 'type'", `tool_choice.tools[${i}].type`);
        }
      });
      const offered = functions.filter((f) => names.has(f.name));
      if (mode === "required" && offered.length === 0) {
        throw invalidRequest(
          "allowed_tools with mode 'required' needs at least one function tool",
          "tool_choice.tools",
        );
      }
      return { offered, choice: mode };
    }
    default:
      throw unsupportedParameter(
        "tool_choice",
        `tool_choice of type '${raw.type}' is not supported: rill runs no hosted tools`,
      );
  }
}

/** Wire form with an id, as `input_items` returns it. */
export function withId(item: InputItem, ctx: Pick<RequestContext, "newId">): Record<string, unknown> {
  switch (item.type) {
    case "message":
      return {
        id: item.id ?? ctx.newId("msg"),
        type: "message",
        role: item.role,
        content: item.content,
        status: "completed",
        ...(item.phase === undefined ? {} : { phase: item.phase }),
      };
    case "function_call":
      return { ...item, id: item.id ?? ctx.newId("fc"), status: item.status ?? "completed" };
    case "function_call_output":
      return { ...item, id: item.id ?? ctx.newId("fco"), status: "completed" };
    case "reasoning":
      return { ...item, id: item.id ?? ctx.newId("rs") };
    case "compaction":
      return { type: "compaction", id: item.id ?? ctx.newId("cmp"), encrypted_content: item.encrypted_content };
    case "web_search_call":
    case "code_interpreter_call":
    case "mcp_call":
      return item;
    default: {
      const never: never = item;
      throw new TypeError(`Unhandled input item ${JSON.stringify(never)}`);
    }
  }
}

/**
 * An `item_reference` → the stored item it names, which then goes through the same parsing as an item sent in
 * full (the Vercel AI SDK references every earlier reasoning and assistant message item when `store` is on).
 */
async function resolveReference(raw: unknown, index: number, ctx: RequestContext): Promise<unknown> {
  if ((raw as { type?: unknown } | null)?.type !== "item_reference") return raw;
  const id = (raw as { id?: unknown }).id;
  if (typeof id !== "string" || id === "") {
    throw invalidRequest("An item_reference needs a non-empty string 'id'", `input[${index}].id`);
  }
  const item = await ctx.item(id);
  if (item === undefined) throw notFound(`Item with id '${id}' not found.`, `input[${index}].id`);
  return item;
}

/** The stored conversation before `previous_response_id`'s output, then that output, as wire items. */
export async function previousItems(
  body: { previous_response_id?: string | null | undefined },
  ctx: RequestContext,
): Promise<Record<string, unknown>[]> {
  const id = body.previous_response_id;
  if (id == null) return [];
  const stored = await ctx.previous(id);
  if (stored === undefined) throw notFound(`Previous response with id '${id}' not found.`, "previous_response_id");
  const status = stored.response.status;
  if (status === "queued" || status === "in_progress") {
    throw invalidRequest(`Previous response '${id}' is still ${status}`, "previous_response_id");
  }
  const conversation = stored.conversation as StoredConversation | null;
  const before = conversation?.version === 1 ? conversation.items : [];
  const output = Array.isArray(stored.response.output) ? stored.response.output as Record<string, unknown>[] : [];
  return [...before, ...output];
}

/** The `conversation` parameter's id (a string, or `{id}`). */
function conversationIdOf(body: CreateResponseBody | InputTokensBody): string | undefined {
  const conversation = body.conversation;
  if (conversation == null) return undefined;
  return typeof conversation === "string" ? conversation : conversation.id;
}

/**
 * Items appended to a conversation must not repeat an id it holds, nor one another's (OpenAI's rule; the store
 * enforces it too).
 */
function checkNewIds(held: readonly Record<string, unknown>[], own: readonly Record<string, unknown>[]): void {
  const ids = new Set(held.map((item) => item.id));
  own.forEach((item, i) => {
    if (ids.has(item.id)) {
      throw invalidRequest(
        `Duplicate item found with id ${String(item.id)}. Remove duplicate items from your input and try again.`,
        `input[${i}].id`,
        "invalid_value",
      );
    }
    ids.add(item.id);
  });
}

/** A function_call_output must answer a function call earlier in the conversation (as OpenAI and Chat require). */
function checkCallOutputs(history: readonly InputItem[], own: readonly InputItem[]): void {
  const calls = new Set<string>();
  for (const item of history) if (item.type === "function_call") calls.add(item.call_id);
  own.forEach((item, i) => {
    if (item.type === "function_call") calls.add(item.call_id);
    if (item.type === "function_call_output" && !calls.has(item.call_id)) {
      throw invalidRequest(
        `No tool call found for function call output with call_id ${JSON.stringify(item.call_id)}`,
        `input[${i}].call_id`,
        "invalid_value",
      );
    }
  });
}

/** Shared by create and input_tokens: conversation, prompt tokens, stored forms. */
export async function preparePrompt(
  body: CreateResponseBody | InputTokensBody,
  ctx: RequestContext,
): Promise<PreparedPrompt> {
  checkUnsupported(body);
  const tools = setupTools(body);
  const conversationId = conversationIdOf(body);
  if (body.input === undefined && body.previous_response_id == null && conversationId === undefined) {
    throw invalidRequest("Missing required parameter: 'input'", "input", "missing_required_parameter");
  }
  // Thousands of items take tens of milliseconds to parse: other streams get turns in between.
  const loop = new LoopYielder();
  const own: InputItem[] = [];
  if (typeof body.input === "string") {
    own.push({ type: "message", role: "user", content: [{ type: "input_text", text: body.input }] });
  } else {
    for (const [i, raw] of (body.input ?? []).entries()) {
      own.push(parseInputItem(await resolveReference(raw, i, ctx), ["input", i]));
      await loop.maybeYield();
    }
  }
  const inputItems = own.map((item) => withId(item, ctx));
  let before: Record<string, unknown>[];
  if (conversationId === undefined) {
    before = await previousItems(body, ctx);
  } else {
    const items = await ctx.conversationItems(conversationId);
    if (items === undefined) throw notFound(`Conversation with id '${conversationId}' not found.`, "conversation");
    before = items;
  }
  await loop.maybeYield();
  // Stored items were validated when they were stored; parsing again gives the typed form.
  const history: InputItem[] = [];
  const historyParam = conversationId === undefined ? "previous_response_id" : "conversation";
  for (const [i, raw] of before.entries()) {
    history.push(parseInputItem(raw, [historyParam, i]));
    await loop.maybeYield();
  }
  checkCallOutputs(history, own);
  if (conversationId !== undefined) checkNewIds(before, inputItems);
  // Stored reasoning with clear text is rendered from it, which stays readable when the server key changes; stored
  // items that carry only a sealed blob (a client's reasoning input, compaction items) are opened.
  const opened = [
    ...openSealedItems(
      history.map((item) =>
        item.type === "reasoning" && (item.content ?? []).length > 0 ? { ...item, encrypted_content: null } : item
      ),
      ctx.seal,
      (i) => `${historyParam}[${i}]`,
    ),
    ...openSealedItems(own, ctx.seal, (i) => `input[${i}]`),
  ];
  const messages = itemsToMessages(opened);
  const effort = body.reasoning?.effort;
  const choice = tools.offered.length === 0 && typeof tools.choice === "string" ? "none" : tools.choice;
  const structured = structuredFor(body, tools.offered, choice, ctx);
  const input: PromptInput = {
    ...(body.instructions == null ? {} : { instructions: body.instructions }),
    messages,
    tools: tools.offered,
    // With the grammar enforcing the choice the model reasons first and then calls: no prefilled call opening.
    toolChoice: grammarForcesChoice(structured) ? "auto" : choice,
    ...(effort == null ? {} : { reasoningEffort: EFFORT[effort] ?? "medium" }),
  };
  const { prompt, tokens } = await fitPrompt(
    ctx.format,
    ctx.tokenizer,
    input,
    ctx.maxModelLen,
    body.truncation ?? "disabled",
    "input",
    loop,
  );
  return {
    prompt,
    promptTokens: tokens,
    // tool_choice none: no tool is callable, so a call the model writes anyway parses as a plain message.
    toolNames: choice === "none" ? [] : tools.offered.map((t) => t.name),
    hostedTools: choice === "none" ? NO_HOSTED_TOOLS : declaredHostedTools(body.tools ?? []),
    inputItems,
    items: opened,
    // By reference: a chain of N turns stores each turn's own items once, not the whole history again per turn.
    // A response in a conversation keeps the history it saw, whatever later happens to the conversation's items.
    conversation: conversationId === undefined
      ? { version: 2, previous: body.previous_response_id ?? null, items: inputItems }
      : { version: 1, items: [...before, ...inputItems] },
    ...(conversationId === undefined ? {} : { conversationId }),
    ...(structured === undefined ? {} : { structured }),
  };
}

/** The request's output constraint; strict is the default for Responses function tools. */
function structuredFor(
  body: CreateResponseBody | InputTokensBody,
  offered: readonly FunctionTool[],
  choice: ToolChoice,
  ctx: RequestContext,
): StructuredRequest | undefined {
  const text = responsesTextFormat(body.text?.format);
  if (!ctx.constrainedDecoding) {
    if (text !== undefined) {
      throw unsupportedParameter("text.format", "Structured outputs are not available for this model's tokenizer");
    }
    return undefined;
  }
  const index = new Map<string, number>();
  (body.tools ?? []).forEach((t, i) => {
    const name = (t as { name?: unknown } | null)?.name;
    if (typeof name === "string" && !index.has(name)) index.set(name, i);
  });
  return structuredRequest({
    text,
    textParam: "text.format",
    tools: offered,
    choice,
    strictDefault: true,
    toolParam: (name) => `tools[${index.get(name) ?? 0}].parameters`,
  });
}

export async function prepareResponse(body: CreateResponseBody, ctx: RequestContext): Promise<PreparedResponse> {
  checkUnsupportedCreate(body);
  if (body.model !== ctx.modelId) {
    throw modelNotFound(body.model, ctx.modelId);
  }
  const prepared = await preparePrompt(body, ctx);
  const includeLogprobs = body.include?.includes("message.output_text.logprobs") ?? false;
  const room = ctx.maxModelLen - prepared.promptTokens.length;
  const toolCallLimit = parallelToolCallLimit(
    ctx.format,
    body.parallel_tool_calls,
    prepared.toolNames.length,
    body.max_tool_calls,
  );
  const temperature = body.temperature ?? ctx.defaults.temperature;
  const topP = body.top_p ?? ctx.defaults.topP;
  const sampling: SamplingParams = {
    temperature,
    topP: samplerTopP(topP),
    topK: ctx.defaults.topK,
    maxTokens: Math.min(body.max_output_tokens ?? room, room),
    stopTokens: ctx.format.stopTokens,
    stopStrings: toolCallLimit.stopStrings,
    logprobs: includeLogprobs ? (body.top_logprobs ?? 0) : -1,
    ...(body.presence_penalty == null ? {} : { presencePenalty: body.presence_penalty }),
    ...(body.frequency_penalty == null ? {} : { frequencyPenalty: body.frequency_penalty }),
  };
  const store = body.store ?? true;
  const background = body.background ?? false;
  const template: ResponseTemplate = {
    id: ctx.newId("resp"),
    createdAt: ctx.now(),
    model: ctx.modelId,
    instructions: body.instructions ?? null,
    tools: normalizeTools(body.tools ?? []),
    toolChoice: body.tool_choice ?? "auto",
    parallelToolCalls: body.parallel_tool_calls ?? true,
    temperature,
    topP,
    maxOutputTokens: body.max_output_tokens ?? null,
    metadata: body.metadata ?? {},
    previousResponseId: body.previous_response_id ?? null,
    ...(prepared.conversationId === undefined ? {} : { conversation: { id: prepared.conversationId } }),
    store,
    background,
    text: { format: body.text?.format ?? { type: "text" }, verbosity: body.text?.verbosity ?? "medium" },
    reasoning: { effort: body.reasoning?.effort ?? null, summary: body.reasoning?.summary ?? null },
    truncation: body.truncation ?? "disabled",
    user: body.user ?? null,
    topLogprobs: body.top_logprobs ?? 0,
    presencePenalty: body.presence_penalty ?? 0,
    frequencyPenalty: body.frequency_penalty ?? 0,
    maxToolCalls: body.max_tool_calls ?? null,
    safetyIdentifier: body.safety_identifier ?? null,
    promptCacheKey: body.prompt_cache_key ?? null,
    serviceTier: "default",
  };
  return {
    ...prepared,
    sampling,
    template,
    includeLogprobs,
    sealReasoning: body.include?.includes("reasoning.encrypted_content") ?? false,
    stream: body.stream ?? false,
    background,
    store,
    toolCallLimit,
  };
}
