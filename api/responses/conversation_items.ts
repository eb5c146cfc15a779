/**
 * Responses input items → the model-neutral conversation.
 *
 * Consecutive assistant-side items (reasoning, assistant messages, function calls) form one assistant turn, in the
 * order the Responses API emits them: reasoning, then text, then tool calls. A new reasoning item after text or calls,
 * or text after calls, starts a new turn. A `function_call_output` becomes a tool message carrying the name of the
 * call it answers (looked up by `call_id` among the earlier items). A compaction item becomes a user message that
 * carries its summary (the earlier conversation it replaces), after SUMMARY_HEADER.
 */
import type { ConversationMessage, ToolCall } from "../../prompt/conversation.ts";
import type { ContentPart, InputItem } from "./responses_schema.ts";

interface PendingTurn {
  content: string;
  reasoning: string;
  toolCalls: ToolCall[];
}

/** Opens the summary of a compaction item in the prompt, so the model reads it as the conversation so far. */
export const SUMMARY_HEADER = "Summary of the conversation so far:\n\n";

export function partsText(parts: readonly ContentPart[]): string {
  let text = "";
  for (const part of parts) text += part.type === "refusal" ? part.refusal : part.text;
  return text;
}

export function itemsToMessages(items: readonly InputItem[]): ConversationMessage[] {
  const out: ConversationMessage[] = [];
  const names = new Map<string, string>();
  let pending: PendingTurn | null = null;
  const flush = () => {
    if (pending === null) return;
    out.push({
      role: "assistant",
      content: pending.content,
      ...(pending.reasoning === "" ? {} : { reasoning: pending.reasoning }),
      ...(pending.toolCalls.length === 0 ? {} : { toolCalls: pending.toolCalls }),
    });
    pending = null;
  };
  for (const item of items) {
    switch (item.type) {
      case "message": {
        const text = partsText(item.content);
        if (item.role !== "assistant") {
          flush();
          out.push({ role: item.role, content: text });
          break;
        }
        if (pending !== null && pending.toolCalls.length > 0) flush();
        pending ??= { content: "", reasoning: "", toolCalls: [] };
        pending.content += text;
        break;
      }
      case "reasoning": {
        const fromContent = (item.content ?? []).map((part) => part.text).join("");
        const text = fromContent !== "" ? fromContent : item.summary.map((part) => part.text).join("\n\n");
        if (pending !== null && (pending.content !== "" || pending.toolCalls.length > 0)) flush();
        pending ??= { content: "", reasoning: "", toolCalls: [] };
        pending.reasoning += text;
        break;
      }
      case "function_call":
        pending ??= { content: "", reasoning: "", toolCalls: [] };
        pending.toolCalls.push({ callId: item.call_id, name: item.name, arguments: item.arguments });
        names.set(item.call_id, item.name);
        break;
      case "function_call_output": {
        flush();
        const name = names.get(item.call_id);
        out.push({ role: "tool", callId: item.call_id, content: item.output, ...(name === undefined ? {} : { name }) });
        break;
      }
      case "compaction":
        // Opened by openSealedItems before this runs; a compaction item without its summary is a server bug.
        if (item.summary === undefined) throw new TypeError("compaction item reached the conversation sealed");
        flush();
        out.push({ role: "user", content: SUMMARY_HEADER + item.summary });
        break;
      case "web_search_call":
      case "code_interpreter_call":
      case "mcp_call":
        // No result exists for a hosted call rill does not run: nothing the model could read.
        break;
      default: {
        const never: never = item;
        throw new TypeError(`Unhandled input item ${JSON.stringify(never)}`);
      }
    }
  }
  flush();
  return out;
}
