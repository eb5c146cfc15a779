/**
 * The harmony chat format (gpt-oss family): rill's own renderer in, the token-level harmony parser out.
 * Every control token is resolved by its text in the model's tokenizer, so no id is hard-coded here.
 */
import type { ChatFormat } from "./chat_format.ts";
import type { PromptInput } from "./conversation.ts";
import type { Tokenizer } from "./tokenizer.ts";
import { HarmonyParser } from "../parsers/harmony_parser.ts";
import { type HarmonyRenderOptions, renderHarmony } from "../parsers/harmony_renderer.ts";
import type { OutputParser } from "../parsers/segment.ts";

export type HarmonyFormatOptions = HarmonyRenderOptions;

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

  return {
    name: "harmony",
    stopTokens,
    render(input: PromptInput): number[] {
      const ids: number[] = [];
      for (const piece of renderHarmony(input, options)) {
        if (piece.kind === "special") ids.push(specials.get(piece.token)!);
        else for (const id of tokenizer.encodeOrdinary(piece.text)) ids.push(id);
      }
      return ids;
    },
    createParser(parserOptions: { readonly toolNames: readonly string[] }): OutputParser {
      return new HarmonyParser(tokenizer, { toolNames: parserOptions.toolNames });
    },
  };
}
