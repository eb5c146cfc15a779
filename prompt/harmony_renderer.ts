/**
 * Renders a model-neutral conversation as a harmony prompt, byte-exact with openai/harmony's renderer (harmony.md §1):
 * system message (identity, knowledge cutoff, date, reasoning effort, channels), developer message (instructions and
 * function tools as the `functions` namespace), the conversation, and the `<|start|>assistant` prefill.
 *
 * The result is a list of pieces, not one string: control tokens are separate from text, so text — including user
 * text that spells `<|start|>` — is always encoded as ordinary tokens (prompt-injection safety, §1.3), and each text
 * piece is one harmony `render_text_into` call, so piecewise BPE matches harmony token for token.
 */
import type { ConversationMessage, FunctionTool, PromptInput, ToolCall } from "./conversation.ts";
import { harmonyTypeScript } from "./harmony_schema.ts";

export type HarmonySpecial = "<|start|>" | "<|message|>" | "<|end|>" | "<|channel|>" | "<|constrain|>" | "<|call|>";

export type HarmonyPiece =
  | { readonly kind: "special"; readonly token: HarmonySpecial }
  | { readonly kind: "text"; readonly text: string };

export interface HarmonyRenderOptions {
  /** `Current date:` line as YYYY-MM-DD; a Date is formatted in UTC; `null` omits the line. Default: `now()`'s day. */
  readonly date?: string | Date | null;
  /** The clock the default date is read from at each render (default the system clock); tests pin it. */
  readonly now?: () => Date;
  readonly modelIdentity?: string;
  readonly knowledgeCutoff?: string;
}

const DEFAULT_IDENTITY = "You are ChatGPT, a large language model trained by OpenAI.";
const DEFAULT_CUTOFF = "2024-06";
const CHANNELS_LINE = "# Valid channels: analysis, commentary, final. Channel must be included for every message.";
const FUNCTIONS_CHANNEL_LINE = "Calls to these tools must go to the commentary channel: 'functions'.";

function formatDate(date: string | Date | null | undefined, now: () => Date): string | undefined {
  if (date === null) return undefined;
  if (typeof date === "string") return date;
  return (date ?? now()).toISOString().slice(0, 10);
}

/** Rust `str::lines()`: split on `\n`, drop one trailing `\r` per line, no final empty line. */
function lines(text: string): string[] {
  if (text.length === 0) return [];
  const out = text.split("\n").map((l) => l.endsWith("\r") ? l.slice(0, -1) : l);
  if (text.endsWith("\n")) out.pop();
  return out;
}

function functionsNamespace(tools: readonly FunctionTool[]): string {
  const block = ["## functions\n", "namespace functions {\n"];
  for (const tool of tools) {
    for (const line of lines(tool.description ?? "")) block.push(`// ${line}`);
    block.push(
      tool.parameters === undefined
        ? `type ${tool.name} = () => any;\n`
        : `type ${tool.name} = (_: ${harmonyTypeScript(tool.parameters)}) => any;\n`,
    );
  }
  block.push("} // namespace functions");
  return ["# Tools", block.join("\n")].join("\n\n");
}

class PieceWriter {
  readonly pieces: HarmonyPiece[] = [];

  special(token: HarmonySpecial): void {
    this.pieces.push({ kind: "special", token });
  }

  text(text: string): void {
    if (text.length > 0) this.pieces.push({ kind: "text", text });
  }

  /** One message, in harmony's header order: author, ` to=recipient`, channel, content type (§1.3). */
  message(
    author: string,
    body: string,
    header: { recipient?: string; channel?: string; constrainJson?: boolean } = {},
    end: "<|end|>" | "<|call|>" = "<|end|>",
  ): void {
    this.special("<|start|>");
    this.text(author);
    if (header.recipient !== undefined) this.text(` to=${header.recipient}`);
    if (header.channel !== undefined) {
      this.special("<|channel|>");
      this.text(header.channel);
    }
    if (header.constrainJson === true) {
      this.text(" ");
      this.special("<|constrain|>");
      this.text("json");
    }
    this.special("<|message|>");
    this.text(body);
    this.special(end);
  }
}

function isInstruction(m: ConversationMessage): m is ConversationMessage & { role: "system" | "developer" } {
  return m.role === "system" || m.role === "developer";
}

/**
 * Which assistant messages keep their reasoning (harmony.md §1.9 recommendation): only those of the current,
 * unfinished tool loop — after the last user message, in a turn that has not produced a final answer yet.
 */
function reasoningKept(messages: readonly ConversationMessage[]): Set<number> {
  let lastUser = -1;
  messages.forEach((m, i) => {
    if (m.role === "user") lastUser = i;
  });
  const kept = new Set<number>();
  for (let i = lastUser + 1; i < messages.length; i++) {
    const m = messages[i]!;
    if (m.role !== "assistant") continue;
    if ((m.toolCalls?.length ?? 0) === 0) return new Set(); // a final answer ends the loop: drop it all
    kept.add(i);
  }
  return kept;
}

function callNames(messages: readonly ConversationMessage[]): Map<string, string> {
  const names = new Map<string, string>();
  for (const m of messages) {
    if (m.role === "assistant") { for (const call of m.toolCalls ?? []) names.set(call.callId, call.name); }
  }
  return names;
}

function writeToolCall(w: PieceWriter, call: ToolCall): void {
  w.message("assistant", call.arguments, {
    recipient: `functions.${call.name}`,
    channel: "commentary",
    constrainJson: true,
  }, "<|call|>");
}

/** The harmony prompt for `input`, ending with the `<|start|>assistant` prefill. */
export function renderHarmony(input: PromptInput, options: HarmonyRenderOptions = {}): HarmonyPiece[] {
  const w = new PieceWriter();
  // tool_choice "none": the model is not offered the tools at all, so it cannot call them.
  const tools = input.toolChoice === "none" ? [] : input.tools;

  const date = formatDate(options.date, options.now ?? (() => new Date()));
  const top = [
    options.modelIdentity ?? DEFAULT_IDENTITY,
    `Knowledge cutoff: ${options.knowledgeCutoff ?? DEFAULT_CUTOFF}`,
    ...(date !== undefined ? [`Current date: ${date}`] : []),
  ].filter((l) => l.length > 0);
  const channels = tools.length > 0 ? `${CHANNELS_LINE}\n${FUNCTIONS_CHANNEL_LINE}` : CHANNELS_LINE;
  const system = [
    ...(top.length > 0 ? [top.join("\n")] : []),
    `Reasoning: ${input.reasoningEffort ?? "medium"}`,
    channels,
  ];
  w.message("system", system.join("\n\n"));

  // Request instructions plus leading system/developer messages are the developer message's instructions.
  const messages = input.messages;
  let first = 0;
  const instructions = input.instructions !== undefined && input.instructions.length > 0 ? [input.instructions] : [];
  while (first < messages.length && isInstruction(messages[first]!)) {
    const content = messages[first]!.content;
    if (content.length > 0) instructions.push(content);
    first++;
  }
  const developer = [
    ...(instructions.length > 0 ? ["# Instructions", instructions.join("\n\n")] : []),
    ...(tools.length > 0 ? [functionsNamespace(tools)] : []),
  ];
  if (developer.length > 0) w.message("developer", developer.join("\n\n"));

  const kept = reasoningKept(messages);
  const names = callNames(messages);
  for (let i = first; i < messages.length; i++) {
    const m = messages[i]!;
    switch (m.role) {
      case "system":
      case "developer":
        if (m.content.length > 0) w.message("developer", `# Instructions\n\n${m.content}`);
        break;
      case "user":
        w.message("user", m.content);
        break;
      case "assistant": {
        const calls = m.toolCalls ?? [];
        if (kept.has(i) && m.reasoning !== undefined && m.reasoning.length > 0) {
          w.message("assistant", m.reasoning, { channel: "analysis" });
        }
        if (calls.length === 0) {
          // History finals end with <|end|>, never <|return|> (§1.3).
          w.message("assistant", m.content, { channel: "final" });
        } else {
          // Visible text beside tool calls was a preamble.
          if (m.content.length > 0) w.message("assistant", m.content, { channel: "commentary" });
          for (const call of calls) writeToolCall(w, call);
        }
        break;
      }
      case "tool": {
        const name = m.name ?? names.get(m.callId) ?? "unknown";
        w.message(`functions.${name}`, m.content, { recipient: "assistant", channel: "commentary" });
        break;
      }
      default: {
        const never: never = m;
        throw new TypeError(`Unknown message role: ${JSON.stringify(never)}`);
      }
    }
  }

  w.special("<|start|>");
  w.text("assistant");
  return w.pieces;
}

/** The prompt as text, control tokens written as their literal text (for logs and byte-exact tests). */
export function harmonyPromptText(pieces: readonly HarmonyPiece[]): string {
  return pieces.map((p) => p.kind === "special" ? p.token : p.text).join("");
}
