/**
 * zod schemas for `POST /v1/responses` (and `/v1/responses/input_tokens`).
 *
 * Every request field of the Responses spec is recognised. A field rill cannot honour is rejected with a 400 naming
 * it (see `responses_request.ts` for the semantic checks); an unknown top-level field is a 400 `unknown_parameter`.
 * Input items and tools are parsed one by one, dispatched on `type`, so an error names the exact item
 * (`input[3].call_id`) instead of a vague union failure. Inside items, extra keys are tolerated: clients replay output
 * items verbatim, and those carry output-only fields (`annotations`, `logprobs`, `status`, …).
 */
import { z } from "zod";
import { formatParam, parseOrThrow, type Path } from "../validation.ts";
import { checkToolSchema } from "../json_limits.ts";
import { invalidRequest, unsupportedParameter } from "../../prompt/errors.ts";

const nullish = <T extends z.ZodType>(schema: T) => schema.nullable().optional();

// ---------------------------------------------------------------------------------------------------------------
// Input items

const InputTextPart = z.looseObject({ type: z.literal("input_text"), text: z.string() });
const OutputTextPart = z.looseObject({ type: z.literal("output_text"), text: z.string() });
const RefusalPart = z.looseObject({ type: z.literal("refusal"), refusal: z.string() });

export type ContentPart = { type: "input_text" | "output_text"; text: string } | { type: "refusal"; refusal: string };

const MessageBase = {
  type: z.literal("message").optional(),
  id: nullish(z.string()),
  status: nullish(z.string()),
  phase: nullish(z.enum(["commentary", "final_answer"])),
};

const MessageItem = z.looseObject({
  ...MessageBase,
  role: z.enum(["user", "assistant", "system", "developer"]),
  content: z.union([z.string(), z.array(z.unknown())]),
});

const FunctionCallItem = z.looseObject({
  type: z.literal("function_call"),
  id: nullish(z.string()),
  call_id: z.string().min(1),
  name: z.string().min(1),
  arguments: z.string(),
  status: nullish(z.string()),
});

const FunctionCallOutputItem = z.looseObject({
  type: z.literal("function_call_output"),
  id: nullish(z.string()),
  call_id: z.string().min(1),
  output: z.union([z.string(), z.array(z.unknown())]),
  status: nullish(z.string()),
});

const ReasoningItem = z.looseObject({
  type: z.literal("reasoning"),
  id: nullish(z.string()),
  summary: z.array(z.looseObject({ type: z.literal("summary_text"), text: z.string() })),
  content: nullish(z.array(z.looseObject({ type: z.literal("reasoning_text"), text: z.string() }))),
  encrypted_content: nullish(z.string()),
  status: nullish(z.string()),
});

/** A compaction item (`POST /v1/responses/compact`): its summary is sealed in `encrypted_content`. */
const CompactionItem = z.looseObject({
  type: z.literal("compaction"),
  id: nullish(z.string()),
  encrypted_content: z.string(),
});

/**
 * Hosted-tool calls rill's own parsers emit (harmony `browser.*`, `python`, MCP). Clients such as Codex replay the
 * whole output history, so these are accepted as input; they carry no result a model could read, so they add
 * nothing to the prompt.
 */
const HostedCallItem = z.looseObject({
  type: z.enum(["web_search_call", "code_interpreter_call", "mcp_call"]),
  id: z.string().min(1),
});

export type MessageInput = {
  type: "message";
  id?: string;
  role: "user" | "assistant" | "system" | "developer";
  content: ContentPart[];
  phase?: "commentary" | "final_answer";
};
export type FunctionCallInput = z.output<typeof FunctionCallItem>;
export type FunctionCallOutputInput = { type: "function_call_output"; id?: string; call_id: string; output: string };
export type ReasoningInput = z.output<typeof ReasoningItem>;
export type HostedCallInput = z.output<typeof HostedCallItem>;
/** `summary` is filled in by the server once `encrypted_content` is opened (sealed_items.ts), never by clients. */
export type CompactionInput = { type: "compaction"; id?: string; encrypted_content: string; summary?: string };
export type InputItem =
  | MessageInput
  | FunctionCallInput
  | FunctionCallOutputInput
  | ReasoningInput
  | HostedCallInput
  | CompactionInput;

/** Item types of the spec that rill recognises but cannot take as input (it never produces or runs them). */
const UNSUPPORTED_ITEM_TYPES = new Set([
  "item_reference",
  "custom_tool_call",
  "custom_tool_call_output",
  "mcp_list_tools",
  "mcp_approval_request",
  "mcp_approval_response",
  "file_search_call",
  "image_generation_call",
  "computer_call",
  "computer_call_output",
  "local_shell_call",
  "local_shell_call_output",
  "shell_call",
  "shell_call_output",
  "apply_patch_call",
  "apply_patch_call_output",
]);

function parseContentParts(
  content: readonly unknown[],
  role: MessageInput["role"],
  base: Path,
): ContentPart[] {
  return content.map((part, j) => {
    const at = [...base, j];
    const type = (part as { type?: unknown } | null)?.type;
    switch (type) {
      case "input_text":
        return { type: "input_text", text: parseOrThrow(InputTextPart, part, at).text };
      case "output_text":
        if (role !== "assistant") {
          throw invalidRequest(
            `'output_text' content is only valid in assistant messages`,
            formatParam([...at, "type"]),
          );
        }
        return { type: "output_text", text: parseOrThrow(OutputTextPart, part, at).text };
      case "refusal":
        if (role !== "assistant") {
          throw invalidRequest(`'refusal' content is only valid in assistant messages`, formatParam([...at, "type"]));
        }
        return { type: "refusal", refusal: parseOrThrow(RefusalPart, part, at).refusal };
      case "input_image":
      case "input_file":
      case "input_audio":
        throw unsupportedParameter(
          formatParam([...at, "type"]),
          `Content of type '${type}' is not supported: rill serves text-only models`,
        );
      default:
        throw invalidRequest(
          `Invalid content part type ${JSON.stringify(type)}; expected 'input_text'${
            role === "assistant" ? ", 'output_text' or 'refusal'" : ""
          }`,
          formatParam([...at, "type"]),
          "invalid_value",
        );
    }
  });
}

/** Parses one wire input item; `base` is its path (e.g. `["input", 2]`). */
export function parseInputItem(raw: unknown, base: Path): InputItem {
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) {
    throw invalidRequest("Each input item must be an object", formatParam(base), "invalid_type");
  }
  const type = (raw as { type?: unknown }).type ?? "message";
  switch (type) {
    case "message": {
      const item = parseOrThrow(MessageItem, raw, base);
      const content = typeof item.content === "string"
        ? [{ type: item.role === "assistant" ? "output_text" as const : "input_text" as const, text: item.content }]
        : parseContentParts(item.content, item.role, [...base, "content"]);
      return {
        type: "message",
        role: item.role,
        content,
        ...(item.id == null ? {} : { id: item.id }),
        ...(item.phase == null ? {} : { phase: item.phase }),
      };
    }
    case "function_call":
      return parseOrThrow(FunctionCallItem, raw, base);
    case "function_call_output": {
      const item = parseOrThrow(FunctionCallOutputItem, raw, base);
      const output = typeof item.output === "string"
        ? item.output
        : parseContentParts(item.output, "user", [...base, "output"]).map((p) =>
          p.type === "refusal" ? p.refusal : p.text
        )
          .join("");
      return {
        type: "function_call_output",
        call_id: item.call_id,
        output,
        ...(item.id == null ? {} : { id: item.id }),
      };
    }
    case "reasoning":
      return parseOrThrow(ReasoningItem, raw, base);
    case "web_search_call":
    case "code_interpreter_call":
    case "mcp_call":
      return parseOrThrow(HostedCallItem, raw, base);
    case "compaction": {
      const item = parseOrThrow(CompactionItem, raw, base);
      return {
        type: "compaction",
        encrypted_content: item.encrypted_content,
        ...(item.id == null ? {} : { id: item.id }),
      };
    }
    default:
      if (typeof type === "string" && UNSUPPORTED_ITEM_TYPES.has(type)) {
        throw unsupportedParameter(
          formatParam([...base, "type"]),
          `Input items of type '${type}' are not supported by rill`,
        );
      }
      throw invalidRequest(
        `Invalid input item type ${JSON.stringify(type)}`,
        formatParam([...base, "type"]),
        "invalid_value",
      );
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Tools

const FunctionToolSchema = z.looseObject({
  type: z.literal("function"),
  name: z.string().regex(/^[A-Za-z0-9_.:-]{1,128}$/, "must be 1-128 letters, digits, '_', '-', '.' or ':'"),
  description: nullish(z.string()),
  parameters: nullish(z.record(z.string(), z.unknown())),
  strict: nullish(z.boolean()),
});

export type FunctionToolInput = z.output<typeof FunctionToolSchema>;

/**
 * Non-function tool types of the spec. They are accepted (Codex sends `web_search`, `custom`, `local_shell`, … in every
 * request) and echoed in the response's `tools`, but never offered to the model: rill runs no hosted tools and its
 * parsers only produce function calls for declared function tools.
 */
export const HOSTED_TOOL_TYPES: ReadonlySet<string> = new Set([
  "custom",
  "web_search",
  "web_search_2025_08_26",
  "web_search_preview",
  "web_search_preview_2025_03_11",
  "file_search",
  "mcp",
  "code_interpreter",
  "image_generation",
  "computer_use_preview",
  "computer",
  "local_shell",
  "shell",
  "apply_patch",
  "namespace",
  "tool_search",
  "programmatic_tool_calling",
]);

export type ToolInput = { kind: "function"; tool: FunctionToolInput } | { kind: "hosted"; type: string };

export function parseTool(raw: unknown, base: Path): ToolInput {
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) {
    throw invalidRequest("Each tool must be an object", formatParam(base), "invalid_type");
  }
  const type = (raw as { type?: unknown }).type;
  if (type === "function") {
    const tool = parseOrThrow(FunctionToolSchema, raw, base);
    if (tool.parameters != null) checkToolSchema(tool.parameters, formatParam([...base, "parameters"]));
    return { kind: "function", tool };
  }
  if (typeof type === "string" && HOSTED_TOOL_TYPES.has(type)) {
    return { kind: "hosted", type };
  }
  throw invalidRequest(`Invalid tool type ${JSON.stringify(type)}`, formatParam([...base, "type"]), "invalid_value");
}

// ---------------------------------------------------------------------------------------------------------------
// The request body

const ToolChoiceSchema = z.union([
  z.enum(["none", "auto", "required"]),
  z.looseObject({ type: z.string() }),
]);

export const Metadata = z.record(z.string().max(64, "metadata keys are at most 64 characters"), z.string().max(512))
  .refine((m) => Object.keys(m).length <= 16, "metadata has at most 16 pairs");

export const INCLUDE_VALUES = [
  "file_search_call.results",
  "web_search_call.results",
  "web_search_call.action.sources",
  "message.input_image.image_url",
  "computer_call_output.output.image_url",
  "code_interpreter_call.outputs",
  "reasoning.encrypted_content",
  "message.output_text.logprobs",
] as const;

/** Fields shared by `POST /v1/responses` and `POST /v1/responses/input_tokens` (what shapes the prompt). */
const PromptFields = {
  model: z.string().min(1),
  input: z.union([z.string(), z.array(z.unknown())]).optional(),
  instructions: nullish(z.string()),
  tools: nullish(z.array(z.unknown())),
  tool_choice: nullish(ToolChoiceSchema),
  parallel_tool_calls: nullish(z.boolean()),
  previous_response_id: nullish(z.string().min(1)),
  conversation: nullish(z.union([z.string(), z.looseObject({ id: z.string() })])),
  // Strict: a misspelt key (`reasoning.efort`) is a 400 naming it, never silently ignored.
  reasoning: nullish(z.strictObject({
    effort: nullish(z.enum(["none", "minimal", "low", "medium", "high", "xhigh", "max"])),
    summary: nullish(z.enum(["auto", "concise", "detailed"])),
    generate_summary: nullish(z.enum(["auto", "concise", "detailed"])),
    context: nullish(z.enum(["auto", "current_turn", "all_turns"])),
    mode: nullish(z.string()),
  })),
  text: nullish(z.strictObject({
    format: nullish(z.looseObject({ type: z.enum(["text", "json_schema", "json_object"]) })),
    verbosity: nullish(z.enum(["low", "medium", "high"])),
  })),
  truncation: nullish(z.enum(["auto", "disabled"])),
};

export const CreateResponseSchema = z.strictObject({
  ...PromptFields,
  max_output_tokens: nullish(z.number().int().min(1)),
  max_tool_calls: nullish(z.number().int().min(0)),
  temperature: nullish(z.number().min(0).max(2)),
  top_p: nullish(z.number().min(0).max(1)),
  top_logprobs: nullish(z.number().int().min(0).max(20)),
  presence_penalty: nullish(z.number().min(-2).max(2)),
  frequency_penalty: nullish(z.number().min(-2).max(2)),
  include: nullish(z.array(z.enum(INCLUDE_VALUES))),
  metadata: nullish(Metadata),
  store: nullish(z.boolean()),
  background: nullish(z.boolean()),
  stream: nullish(z.boolean()),
  stream_options: nullish(z.strictObject({ include_obfuscation: nullish(z.boolean()) })),
  service_tier: nullish(z.enum(["auto", "default", "flex", "scale", "priority", "fast", "ultrafast"])),
  user: nullish(z.string()),
  safety_identifier: nullish(z.string().max(64)),
  prompt_cache_key: nullish(z.string()),
  prompt_cache_retention: nullish(z.enum(["in_memory", "24h"])),
  prompt_cache_options: nullish(z.unknown()),
  prompt: nullish(z.unknown()),
  context_management: nullish(z.unknown()),
  moderation: nullish(z.unknown()),
  /** Codex's per-request client info: opaque to the server. */
  client_metadata: nullish(z.record(z.string(), z.unknown())),
});

export type CreateResponseBody = z.output<typeof CreateResponseSchema>;

export const InputTokensSchema = z.strictObject({
  ...PromptFields,
  model: z.string().min(1).optional(),
  personality: nullish(z.unknown()),
});

export type InputTokensBody = z.output<typeof InputTokensSchema>;
