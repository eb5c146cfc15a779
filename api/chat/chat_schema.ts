/**
 * zod schema for `POST /v1/chat/completions`, and its conversion to the model-neutral conversation.
 *
 * Honoured: messages (system/developer/user/assistant/tool, text content, assistant `tool_calls` and
 * `reasoning_content`), function tools, tool_choice, parallel_tool_calls, max_tokens / max_completion_tokens,
 * temperature, top_p, seed, stop, logprobs/top_logprobs, stream, stream_options.include_usage, reasoning_effort,
 * n (1..MAX_CHOICES), presence/frequency penalties, logit_bias, vLLM's top_k/min_p/repetition_penalty
 * (api/sampling_fields.ts), response_format. Accepted as hints that hold trivially (nothing to echo): metadata,
 * user, safety_identifier, prompt_cache_key, verbosity, service_tier auto/default. Anything else is a 400 naming it.
 */
import { z } from "zod";
import type { ConversationMessage, FunctionTool, ToolChoice } from "../../prompt/conversation.ts";
import { invalidRequest, unsupportedParameter } from "../../prompt/errors.ts";
import { checkToolSchema } from "../json_limits.ts";
import { MAX_CHOICES, SamplingFieldShape } from "../sampling_fields.ts";

const nullish = <T extends z.ZodType>(schema: T) => schema.nullable().optional();

const TextPart = z.looseObject({ type: z.literal("text"), text: z.string() });
const Content = z.union([z.string(), z.array(z.union([TextPart, z.looseObject({ type: z.string() })]))]);

const ToolCallSchema = z.looseObject({
  id: z.string().min(1),
  type: z.literal("function"),
  function: z.looseObject({ name: z.string().min(1), arguments: z.string() }),
});

const MessageSchema = z.discriminatedUnion("role", [
  z.looseObject({ role: z.literal("system"), content: Content, name: z.string().optional() }),
  z.looseObject({ role: z.literal("developer"), content: Content, name: z.string().optional() }),
  z.looseObject({ role: z.literal("user"), content: Content, name: z.string().optional() }),
  z.looseObject({
    role: z.literal("assistant"),
    content: nullish(Content),
    reasoning_content: nullish(z.string()),
    tool_calls: nullish(z.array(ToolCallSchema)),
    refusal: nullish(z.string()),
    name: z.string().optional(),
  }),
  z.looseObject({ role: z.literal("tool"), content: Content, tool_call_id: z.string().min(1) }),
]);

const FunctionToolSchema = z.strictObject({
  type: z.literal("function"),
  function: z.looseObject({
    name: z.string().regex(/^[A-Za-z0-9_.:-]{1,128}$/, "must be 1-128 letters, digits, '_', '-', '.' or ':'"),
    description: nullish(z.string()),
    parameters: nullish(z.record(z.string(), z.unknown())),
    strict: nullish(z.boolean()),
  }),
});

export const ChatCompletionSchema = z.strictObject({
  model: z.string().min(1),
  messages: z.array(MessageSchema).min(1),
  tools: nullish(z.array(FunctionToolSchema)),
  tool_choice: nullish(z.union([
    z.enum(["none", "auto", "required"]),
    z.strictObject({ type: z.literal("function"), function: z.strictObject({ name: z.string() }) }),
  ])),
  parallel_tool_calls: nullish(z.boolean()),
  max_tokens: nullish(z.number().int().min(1)),
  max_completion_tokens: nullish(z.number().int().min(1)),
  temperature: nullish(z.number().min(0).max(2)),
  top_p: nullish(z.number().min(0).max(1)),
  seed: nullish(z.number().int()),
  stop: nullish(z.union([z.string(), z.array(z.string()).max(4)])),
  n: nullish(z.number().int().min(1).max(MAX_CHOICES)),
  logprobs: nullish(z.boolean()),
  top_logprobs: nullish(z.number().int().min(0).max(20)),
  stream: nullish(z.boolean()),
  stream_options: nullish(z.strictObject({
    include_usage: nullish(z.boolean()),
    include_obfuscation: nullish(z.boolean()),
  })),
  reasoning_effort: nullish(z.enum(["none", "minimal", "low", "medium", "high", "xhigh"])),
  ...SamplingFieldShape,
  response_format: nullish(z.looseObject({
    type: z.enum(["text", "json_object", "json_schema"]),
    json_schema: nullish(z.looseObject({})),
  })),
  user: nullish(z.string()),
  safety_identifier: nullish(z.string()),
  prompt_cache_key: nullish(z.string()),
  metadata: nullish(z.record(z.string(), z.string())),
  store: nullish(z.boolean()),
  service_tier: nullish(z.string()),
  modalities: nullish(z.array(z.string())),
  audio: nullish(z.unknown()),
  prediction: nullish(z.unknown()),
  web_search_options: nullish(z.unknown()),
  functions: nullish(z.unknown()),
  function_call: nullish(z.unknown()),
  verbosity: nullish(z.enum(["low", "medium", "high"])),
});

export type ChatCompletionBody = z.output<typeof ChatCompletionSchema>;

function contentText(content: z.output<typeof Content> | null | undefined, param: string): string {
  if (content == null) return "";
  if (typeof content === "string") return content;
  let text = "";
  content.forEach((part, i) => {
    if (part.type !== "text" || typeof part.text !== "string") {
      throw unsupportedParameter(
        `${param}[${i}].type`,
        `Content of type '${part.type}' is not supported: rill serves text-only models`,
      );
    }
    text += part.text;
  });
  return text;
}

/** Rejects what rill cannot honour, naming the parameter. */
export function checkChatSupported(body: ChatCompletionBody): void {
  if (body.store === true) throw unsupportedParameter("store", "Stored chat completions are not supported");
  if (body.service_tier != null && body.service_tier !== "auto" && body.service_tier !== "default") {
    throw unsupportedParameter("service_tier", `Service tier '${body.service_tier}' is not available`);
  }
  if (body.modalities != null && body.modalities.some((m) => m !== "text")) {
    throw unsupportedParameter("modalities", "Only the 'text' modality is supported");
  }
  for (const key of ["audio", "prediction", "web_search_options", "functions", "function_call"] as const) {
    if (body[key] != null) throw unsupportedParameter(key, `'${key}' is not supported by rill`);
  }
  if (body.stream_options != null && body.stream !== true) {
    throw invalidRequest("'stream_options' is only allowed when 'stream' is true", "stream_options");
  }
  if (body.top_logprobs != null && body.logprobs !== true) {
    throw invalidRequest("'top_logprobs' requires 'logprobs' to be true", "top_logprobs");
  }
}

export function chatMessages(body: ChatCompletionBody): ConversationMessage[] {
  const names = new Map<string, string>();
  return body.messages.map((m, i): ConversationMessage => {
    const param = `messages[${i}].content`;
    switch (m.role) {
      case "system":
      case "developer":
      case "user":
        return { role: m.role, content: contentText(m.content, param) };
      case "assistant": {
        const calls = (m.tool_calls ?? []).map((c) => {
          names.set(c.id, c.function.name);
          return { callId: c.id, name: c.function.name, arguments: c.function.arguments };
        });
        return {
          role: "assistant",
          content: contentText(m.content, param) || (m.refusal ?? ""),
          ...(m.reasoning_content == null || m.reasoning_content === "" ? {} : { reasoning: m.reasoning_content }),
          ...(calls.length === 0 ? {} : { toolCalls: calls }),
        };
      }
      case "tool": {
        const name = names.get(m.tool_call_id);
        // Only a call of an earlier assistant message can be answered: the prompt names the function it came from.
        if (name === undefined) {
          throw invalidRequest(
            `Invalid parameter: a 'tool' message must answer a tool call of an earlier assistant message; ` +
              `no tool call has the id '${m.tool_call_id}'`,
            `messages[${i}].tool_call_id`,
          );
        }
        return {
          role: "tool",
          callId: m.tool_call_id,
          content: contentText(m.content, param),
          name,
        };
      }
      default: {
        const never: never = m;
        throw new TypeError(`Unhandled message ${JSON.stringify(never)}`);
      }
    }
  });
}

export function chatTools(body: ChatCompletionBody): { tools: FunctionTool[]; choice: ToolChoice } {
  const seen = new Set<string>();
  const tools = (body.tools ?? []).map((t, i): FunctionTool => {
    const f = t.function;
    if (seen.has(f.name)) throw invalidRequest(`Duplicate tool name '${f.name}'`, `tools[${i}].function.name`);
    seen.add(f.name);
    if (f.parameters != null) checkToolSchema(f.parameters, `tools[${i}].function.parameters`);
    return {
      name: f.name,
      ...(f.description == null ? {} : { description: f.description }),
      ...(f.parameters == null ? {} : { parameters: f.parameters }),
      ...(f.strict == null ? {} : { strict: f.strict }),
    };
  });
  const raw = body.tool_choice ?? "auto";
  if (typeof raw !== "string") {
    if (!seen.has(raw.function.name)) {
      throw invalidRequest(`Tool choice '${raw.function.name}' is not among the tools`, "tool_choice.function.name");
    }
    return { tools, choice: { type: "function", name: raw.function.name } };
  }
  if (raw === "required" && tools.length === 0) {
    throw invalidRequest("tool_choice 'required' needs at least one tool", "tool_choice");
  }
  return { tools, choice: tools.length === 0 ? "none" : raw };
}
