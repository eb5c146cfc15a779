/**
 * The harmony chat format (gpt-oss family): rill's own renderer in, the token-level harmony parser out.
 * Every control token is resolved by its text in the model's tokenizer, so no id is hard-coded here.
 */
import type { ChatFormat } from "./chat_format.ts";
import type { PromptInput, ToolChoice } from "./conversation.ts";
import { forcedCall } from "./forced_tool_call.ts";
import type { Tokenizer } from "../checkpoint/tokenizer.ts";
import { HarmonyParser } from "../parsers/harmony_parser.ts";
import { type HostedTools, NO_HOSTED_TOOLS } from "../parsers/hosted_tools.ts";
import { type HarmonyRenderOptions, renderHarmony } from "./harmony_renderer.ts";
import type { OutputParser } from "../parsers/segment.ts";
import { PrefilledParser } from "../parsers/prefilled_parser.ts";

export type HarmonyFormatOptions = HarmonyRenderOptions;

/** Characters of text encoded at once by `renderSteps`. */
const SLICE_CHARS = 8192;

/**
 * Long text cut where the o200k pre-tokenizer always starts a new pre-token — before a space that follows a
 * non-space and precedes a non-space (its patterns take a word's leading space, and none spans "x y") — so
 * encoding the slices one by one gives exactly the tokens of encoding the whole. Text with no such place near a
 * boundary stays in one slice.
 */
function* wordSlices(text: string): Generator<string> {
  let at = 0;
  while (text.length - at > SLICE_CHARS) {
    let cut = -1;
    for (let i = at + SLICE_CHARS; i > at + SLICE_CHARS / 2; i--) {
      if (text.charCodeAt(i) === 32 && text.charCodeAt(i - 1) > 32 && text.charCodeAt(i + 1) > 32) {
        cut = i;
        break;
      }
    }
    if (cut < 0) break;
    yield text.slice(at, cut);
    at = cut;
  }
  yield at === 0 ? text : text.slice(at);
}

function requireSpecial(tokenizer: Tokenizer, text: string): number {
  const id = tokenizer.specialId(text);
  if (id === undefined) throw new TypeError(`Tokenizer is not a harmony tokenizer: no special token ${text}`);
  return id;
}

/**
 * Sampler stop tokens are `<|return|>` and `<|call|>` (harmony's `stop_tokens_for_assistant_actions`), not `<|end|>`:
 * after `<|end|>` the model goes on with its next message. `<|endoftext|>` is added when the vocabulary has it,
 * as gpt-oss's generation config lists it among the EOS ids.
 */
export function createHarmonyFormat(tokenizer: Tokenizer, options: HarmonyFormatOptions = {}): ChatFormat {
  const stopTokens = [requireSpecial(tokenizer, "<|return|>"), requireSpecial(tokenizer, "<|call|>")];
  const endOfText = tokenizer.specialId("<|endoftext|>");
  if (endOfText !== undefined) stopTokens.push(endOfText);
  // Resolved up front so a tokenizer missing any renderer token fails at load, not on the first request.
  const specials = new Map(
    ["<|start|>", "<|message|>", "<|end|>", "<|channel|>", "<|constrain|>", "<|call|>"].map((
      t,
    ) => [t, requireSpecial(tokenizer, t)]),
  );

  const special = (text: string): number => specials.get(text)!;
  /**
   * The header a forcing tool_choice prefills after `<|start|>assistant`, written as the renderer writes history
   * calls: a named call up to `<|message|>` (the model writes only the arguments), any call up to `functions.`.
   */
  const prefill = (choice: ToolChoice | undefined, toolNames: readonly string[]): number[] => {
    const forced = forcedCall(choice, toolNames);
    switch (forced.kind) {
      case "free":
        return [];
      case "any":
        return tokenizer.encodeOrdinary(" to=functions.");
      case "named":
        return [
          ...tokenizer.encodeOrdinary(` to=functions.${forced.name}`),
          special("<|channel|>"),
          ...tokenizer.encodeOrdinary("commentary "),
          special("<|constrain|>"),
          ...tokenizer.encodeOrdinary("json"),
          special("<|message|>"),
        ];
      default: {
        const never: never = forced;
        throw new Error(`Unreachable forced call ${String(never)}`);
      }
    }
  };

  function* steps(input: PromptInput): Generator<readonly number[]> {
    for (const piece of renderHarmony(input, options)) {
      if (piece.kind === "special") yield [special(piece.token)];
      else for (const slice of wordSlices(piece.text)) yield tokenizer.encodeOrdinary(slice);
    }
    yield prefill(input.toolChoice, input.tools.map((t) => t.name));
  }

  return {
    name: "harmony",
    stopTokens,
    // Reasoning (analysis) stays free; the next assistant message is the final-channel answer or the commentary
    // call addressed to the function, written as the renderer writes history calls.
    constraintLayout: {
      opening: "<|start|>assistant",
      answer: "<|channel|>final<|message|>",
      answerTrigger: "<|channel|>final",
      calls: (name) => [
        ` to=functions.${name}<|channel|>commentary <|constrain|>json<|message|>`,
        `<|channel|>commentary to=functions.${name} <|constrain|>json<|message|>`,
      ],
      callTriggers: [" to=functions."],
      callEnd: "",
      answerStop: "<|return|>",
      callStop: "<|call|>",
      endTokens: stopTokens,
    },
    render(input: PromptInput): number[] {
      const ids: number[] = [];
      for (const step of steps(input)) for (const id of step) ids.push(id);
      return ids;
    },
    renderSteps: steps,
    createParser(
      parserOptions: {
        readonly toolNames: readonly string[];
        readonly toolChoice?: ToolChoice;
        readonly hostedTools?: HostedTools;
      },
    ) {
      const parser: OutputParser = new HarmonyParser(tokenizer, {
        toolNames: parserOptions.toolNames,
        hostedTools: parserOptions.hostedTools ?? NO_HOSTED_TOOLS,
      });
      const ids = prefill(parserOptions.toolChoice, parserOptions.toolNames);
      return ids.length === 0 ? parser : new PrefilledParser(parser, ids);
    },
  };
}
