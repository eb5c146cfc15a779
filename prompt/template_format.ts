import { Template } from "@huggingface/jinja";
import { ChatmlParser } from "../parsers/chatml_parser.ts";
import type { ChatFormat } from "./chat_format.ts";
import type { ConversationMessage, FunctionTool, PromptInput, ToolChoice } from "./conversation.ts";
import { forcedCall } from "./forced_tool_call.ts";
import { PrefilledParser } from "../parsers/prefilled_parser.ts";
import { renderChatTemplate } from "./chat_template_render.ts";
import type { Tokenizer } from "../checkpoint/tokenizer.ts";

/**
 * The chat format of a model that ships a Jinja chat template (Qwen, Hermes, Llama, ...): the conversation becomes
 * HF-style `messages`/`tools`, the template renders the prompt text, and the tokenizer encodes it with specials.
 * Output is parsed as ChatML with `<think>` reasoning and `<tool_call>` JSON calls.
 */
export class TemplateFormatError extends Error {
  override name = "TemplateFormatError";
}

export interface TemplateFormatOptions {
  /** Texts of `bos_token` / `eos_token` from tokenizer_config.json (templates print them). */
  readonly bosToken?: string | undefined;
  readonly eosToken?: string | undefined;
  /** A "tool_use" template from a list-form chat_template, used when the request has tools. */
  readonly toolUseTemplate?: string | undefined;
  /** EOS ids from config.json / generation_config.json; they always stop generation. */
  readonly eosTokenIds?: readonly number[];
  /** Passed to the template as `enable_thinking` (Qwen3). Default true. */
  readonly enableThinking?: boolean;
  /** The clock behind the template's `strftime_now` (default the system clock); tests pin it. */
  readonly now?: () => Date;
}

/** An HF chat-template message. Keys are only present when set, since templates test `is defined`. */
export type TemplateMessage = Record<string, unknown>;

const REASONING_START = "<think>";
const REASONING_END = "</think>";
const TOOL_CALL_START = "<tool_call>";
const TOOL_CALL_END = "</tool_call>";
/** Control tokens that end a ChatML assistant turn when the tokenizer has them. */
const STOP_TEXTS = ["<|im_end|>", "<|endoftext|>"];

/** Qwen templates print arguments with `tojson`, so they must be objects; text that is not JSON stays a string. */
function parseArguments(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

function toolJson(tool: FunctionTool): Record<string, unknown> {
  const fn: Record<string, unknown> = { name: tool.name };
  if (tool.description !== undefined) fn.description = tool.description;
  if (tool.parameters !== undefined) fn.parameters = tool.parameters;
  return { type: "function", function: fn };
}

/**
 * Converts the model-neutral prompt to HF chat-template inputs. Leading instructions and system/developer messages
 * merge into one system message because templates only place `messages[0]` in the system slot; later
 * system/developer messages stay in place as `system`.
 */
export function toTemplateMessages(input: PromptInput): TemplateMessage[] {
  const out: TemplateMessage[] = [];
  const names = new Map<string, string>();
  const leading: string[] = input.instructions !== undefined && input.instructions !== "" ? [input.instructions] : [];
  let i = 0;
  for (; i < input.messages.length; i++) {
    const m = input.messages[i]!;
    if (m.role !== "system" && m.role !== "developer") break;
    leading.push(m.content);
  }
  if (leading.length > 0) out.push({ role: "system", content: leading.join("\n\n") });
  for (; i < input.messages.length; i++) out.push(messageJson(input.messages[i]!, names));
  return out;
}

function messageJson(m: ConversationMessage, names: Map<string, string>): TemplateMessage {
  switch (m.role) {
    case "system":
    case "developer":
      return { role: "system", content: m.content };
    case "user":
      return { role: "user", content: m.content };
    case "assistant": {
      const msg: TemplateMessage = { role: "assistant", content: m.content };
      if (m.reasoning !== undefined && m.reasoning !== "") msg.reasoning_content = m.reasoning;
      if (m.toolCalls !== undefined && m.toolCalls.length > 0) {
        msg.tool_calls = m.toolCalls.map((c) => {
          names.set(c.callId, c.name);
          return { id: c.callId, type: "function", function: { name: c.name, arguments: parseArguments(c.arguments) } };
        });
      }
      return msg;
    }
    case "tool": {
      const msg: TemplateMessage = { role: "tool", content: m.content, tool_call_id: m.callId };
      const name = m.name ?? names.get(m.callId);
      if (name !== undefined) msg.name = name;
      return msg;
    }
    default: {
      const never: never = m;
      throw new TemplateFormatError(`unknown message role ${JSON.stringify(never)}`);
    }
  }
}

/** The tools a template should show: none for tool_choice "none", only the forced one for a named choice. */
function visibleTools(input: PromptInput): readonly FunctionTool[] {
  const choice = input.toolChoice;
  if (choice === "none") return [];
  if (typeof choice === "object") return input.tools.filter((t) => t.name === choice.name);
  return input.tools;
}

/**
 * True when the rendered prompt leaves a `<think>` block open in the assistant turn it starts (templates that
 * prefill `<think>\n`), so the output begins inside reasoning. Only the text after the last `<|im_start|>` counts,
 * so an unclosed block in history cannot leak into the new turn.
 */
export function endsInOpenReasoning(prompt: string): boolean {
  const turnStart = prompt.lastIndexOf("<|im_start|>");
  const tail = turnStart >= 0 ? prompt.slice(turnStart) : prompt;
  const open = tail.lastIndexOf(REASONING_START);
  return open >= 0 && tail.indexOf(REASONING_END, open) < 0;
}

function compile(source: string, what: string): Template {
  try {
    return new Template(source);
  } catch (e) {
    throw new TemplateFormatError(`${what}: ${(e as Error).message}`);
  }
}

export interface TemplateChatFormat extends ChatFormat {
  /** The prompt text before tokenization (for logs, tests and `/tokenize`-style debugging). */
  renderText(input: PromptInput): string;
  /** True when the template opens `<think>` in the generation prompt, so output starts inside reasoning. */
  readonly startsInReasoning: boolean;
}

export function createTemplateFormat(
  tokenizer: Tokenizer,
  chatTemplate: string,
  options: TemplateFormatOptions = {},
): TemplateChatFormat {
  const template = compile(chatTemplate, "chat template");
  const toolTemplate = options.toolUseTemplate === undefined
    ? undefined
    : compile(options.toolUseTemplate, "tool_use chat template");

  const stopTexts = STOP_TEXTS.filter((t) => tokenizer.specialId(t) !== undefined);
  const stopIds = new Set<number>(stopTexts.map((t) => tokenizer.specialId(t)!));
  if (options.eosToken !== undefined) {
    const id = tokenizer.specialId(options.eosToken);
    if (id !== undefined) stopIds.add(id);
  }
  for (const id of options.eosTokenIds ?? []) stopIds.add(id);
  // The parser must also treat config-only EOS tokens (e.g. Llama's <|eot_id|>) as the end of output.
  const parserStopTexts = [...stopIds].filter((id) => tokenizer.isSpecial(id)).map((id) => tokenizer.decode([id]));

  const now = options.now ?? (() => new Date());
  const renderText = (input: PromptInput): string => {
    const tools = visibleTools(input);
    const context: Record<string, unknown> = {
      messages: toTemplateMessages(input),
      add_generation_prompt: true,
      enable_thinking: options.enableThinking ?? true,
      bos_token: options.bosToken ?? "",
      eos_token: options.eosToken ?? "",
    };
    // Templates test `if tools`; leave it undefined rather than an empty list.
    if (tools.length > 0) context.tools = tools.map(toolJson);
    if (input.reasoningEffort !== undefined) context.reasoning_effort = input.reasoningEffort;
    const t = tools.length > 0 && toolTemplate !== undefined ? toolTemplate : template;
    try {
      return renderChatTemplate(t, context, now);
    } catch (e) {
      throw new TemplateFormatError(`chat template failed to render: ${(e as Error).message}`);
    }
  };

  // Whether a prompt ends inside `<think>` is a property of the template and the fixed `enable_thinking`, not of the
  // conversation, so one probe render decides it; createParser gets no prompt and formats are shared across requests.
  let startInReasoning = false;
  try {
    startInReasoning = endsInOpenReasoning(
      renderText({ messages: [{ role: "user", content: "Hi" }], tools: [], toolChoice: "auto" }),
    );
  } catch {
    // A template that rejects the probe (e.g. one demanding a system message) renders real prompts or fails then.
  }
  let reasoningInOutput = startInReasoning;
  if (
    !startInReasoning && (chatTemplate.includes(REASONING_START) || options.toolUseTemplate?.includes(REASONING_START))
  ) {
    try {
      const probe = renderText({ messages: [{ role: "user", content: "Hi" }], tools: [], toolChoice: "auto" });
      const tail = probe.slice(Math.max(0, probe.lastIndexOf("<|im_start|>")));
      reasoningInOutput = !tail.includes(REASONING_END);
    } catch {
      reasoningInOutput = true;
    }
  }
  /**
   * The opening of a Hermes call a forcing tool_choice prefills, in the form templates write history calls: a named
   * call up to its arguments, any call up to its name. A prompt left inside `<think>` closes it first.
   */
  const prefill = (choice: ToolChoice | undefined, toolNames: readonly string[]): number[] => {
    const forced = forcedCall(choice, toolNames);
    if (forced.kind === "free") return [];
    // Ends right after a colon: the space that follows belongs to the model's next token (` {"`, ` "`), so a prefill
    // ending in a space would force a tokenization the model never saw.
    const head = `${startInReasoning ? "" : `${REASONING_START}\n`}\n${REASONING_END}\n\n${TOOL_CALL_START}{"name":`;
    return tokenizer.encode(forced.kind === "named" ? `${head} ${JSON.stringify(forced.name)}, "arguments":` : head);
  };

  return {
    name: tokenizer.specialId("<|im_start|>") !== undefined ? "chatml" : "chat-template",
    stopTokens: [...stopIds],
    toolCallEnd: TOOL_CALL_END,
    // Reasoning stays free; the answer or the Hermes call follows `</think>`. A template that never opens reasoning
    // in the output (no `<think>` in it, or one it closes in the prompt, as Qwen3 with enable_thinking false does)
    // is constrained from the output's first token.
    constraintLayout: {
      opening: reasoningInOutput ? `${REASONING_END}\n\n` : "",
      answer: "",
      calls: (name) => [`${TOOL_CALL_START}{"name": ${JSON.stringify(name)}, "arguments": `],
      callTriggers: [TOOL_CALL_START],
      callEnd: `}${TOOL_CALL_END}`,
      endTokens: [...stopIds],
    },
    renderText,
    startsInReasoning: startInReasoning,
    render(input: PromptInput): number[] {
      return [...tokenizer.encode(renderText(input)), ...prefill(input.toolChoice, input.tools.map((t) => t.name))];
    },
    createParser({ toolNames, toolChoice }) {
      const ids = prefill(toolChoice, toolNames);
      const parser = new ChatmlParser(tokenizer, {
        reasoningStart: REASONING_START,
        reasoningEnd: REASONING_END,
        startInReasoning,
        toolCallStart: TOOL_CALL_START,
        toolCallEnd: TOOL_CALL_END,
        toolNames,
        stopTexts: parserStopTexts,
      });
      return ids.length === 0 ? parser : new PrefilledParser(parser, ids);
    },
  };
}
