import type { PromptInput } from "./conversation.ts";
import type { OutputParser } from "../parsers/segment.ts";

/**
 * How one model family talks: prompt rendering on the way in, output parsing on the way out, and the tokens that
 * end an assistant turn. A loaded model picks one chat format (harmony for gpt-oss, ChatML-with-think for others).
 */
export interface ChatFormat {
  readonly name: string;
  /** Token ids of the whole prompt, ending where the assistant's generation begins. */
  render(input: PromptInput): number[];
  /** A fresh parser for one generation. `toolNames` are the function tools of the request (bare names count). */
  createParser(options: { readonly toolNames: readonly string[] }): OutputParser;
  /** Tokens that end generation (harmony: `<|return|>`, `<|call|>`; ChatML: `<|im_end|>`, EOS). */
  readonly stopTokens: readonly number[];
}
