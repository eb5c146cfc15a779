/**
 * The Chat Completions delta state machine: the segments of one engine step become `choices[0].delta` objects. A
 * reasoning item's text becomes `reasoning_content`, a message's `content`, a function call `tool_calls` deltas (one
 * index per call, id and name in its first delta, then argument fragments). Hosted-tool items (web search, code
 * interpreter, MCP) have no Chat Completions form and produce no deltas. The core also accumulates the whole message
 * for the non-streamed form, so both forms come from the same transitions.
 */
import type { FinishReason } from "../engine/engine.ts";
import type { Logprob } from "../parsers/logprob.ts";
import type { Segment } from "../parsers/segment.ts";
import { type IdSource, randomIds } from "./ids.ts";

export interface ToolCallDelta {
  index: number;
  id?: string;
  type?: "function";
  function: { name?: string; arguments: string };
}

export interface ChatDelta {
  role?: "assistant";
  content?: string;
  reasoning_content?: string;
  tool_calls?: ToolCallDelta[];
}

type Mode = "none" | "content" | "reasoning" | "tool" | "other";

/** Segments → chat deltas, accumulating the whole message for the non-streamed form. */
export class ChatDeltaCore {
  readonly #ids: IdSource;
  #mode: Mode = "none";
  content = "";
  reasoning = "";
  readonly toolCalls: { id: string; name: string; arguments: string }[] = [];
  readonly logprobs: Logprob[] = [];

  constructor(ids: IdSource = randomIds) {
    this.#ids = ids;
  }

  /** One engine step's segments → deltas; consecutive deltas of the same field are merged. */
  push(segments: readonly Segment[]): { delta: ChatDelta; logprobs: Logprob[] }[] {
    const out: { delta: ChatDelta; logprobs: Logprob[] }[] = [];
    const append = (field: "content" | "reasoning_content", text: string, lps: readonly Logprob[] = []) => {
      const last = out[out.length - 1];
      if (last !== undefined && last.delta[field] !== undefined && last.delta.tool_calls === undefined) {
        last.delta[field] += text;
        last.logprobs.push(...lps);
      } else {
        out.push({ delta: { [field]: text }, logprobs: [...lps] });
      }
    };
    for (const s of segments) {
      switch (s.kind) {
        case "open":
          switch (s.item.type) {
            case "message":
              this.#mode = "content";
              break;
            case "reasoning":
              this.#mode = "reasoning";
              break;
            case "function_call": {
              const call = { id: s.item.callId ?? this.#ids.next("call"), name: s.item.name, arguments: "" };
              this.toolCalls.push(call);
              this.#mode = "tool";
              out.push({
                delta: {
                  tool_calls: [{
                    index: this.toolCalls.length - 1,
                    id: call.id,
                    type: "function",
                    function: { name: call.name, arguments: "" },
                  }],
                },
                logprobs: [],
              });
              break;
            }
            case "web_search_call":
            case "code_interpreter_call":
            case "mcp_call":
              this.#mode = "other";
              break;
            default: {
              const never: never = s.item;
              throw new TypeError(`Unhandled item kind ${JSON.stringify(never)}`);
            }
          }
          break;
        case "delta":
          switch (this.#mode) {
            case "content": {
              this.content += s.text;
              const lps = s.logprobs ?? [];
              this.logprobs.push(...lps);
              append("content", s.text, lps);
              break;
            }
            case "reasoning":
              this.reasoning += s.text;
              append("reasoning_content", s.text);
              break;
            case "tool": {
              const index = this.toolCalls.length - 1;
              this.toolCalls[index]!.arguments += s.text;
              const last = out[out.length - 1]?.delta.tool_calls?.[0];
              if (last !== undefined && last.index === index) last.function.arguments += s.text;
              else out.push({ delta: { tool_calls: [{ index, function: { arguments: s.text } }] }, logprobs: [] });
              break;
            }
            case "none":
            case "other":
              break;
            default: {
              const never: never = this.#mode;
              throw new TypeError(`Unhandled mode ${never}`);
            }
          }
          break;
        case "close":
          this.#mode = "none";
          break;
        default: {
          const never: never = s;
          throw new TypeError(`Unhandled segment ${JSON.stringify(never)}`);
        }
      }
    }
    return out;
  }

  finishReason(reason: FinishReason): "stop" | "length" | "tool_calls" {
    if (reason === "length") return "length";
    return this.toolCalls.length > 0 ? "tool_calls" : "stop";
  }
}
