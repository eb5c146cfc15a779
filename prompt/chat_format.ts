import type { PromptInput, ToolChoice } from "./conversation.ts";
import type { OutputParser } from "../parsers/segment.ts";
import type { ConstraintLayout } from "../grammar/output_constraint.ts";
import type { HostedTools } from "../parsers/hosted_tools.ts";

/**
 * How one model family talks: prompt rendering on the way in, output parsing on the way out, and the tokens that
 * end an assistant turn. A loaded model picks one chat format (harmony for gpt-oss, ChatML-with-think for others).
 */
export interface ChatFormat {
  readonly name: string;
  /** Token ids of the whole prompt, ending where the assistant's generation begins. */
  render(input: PromptInput): number[];
  /**
   * Optional: exactly `render`'s tokens, produced a piece at a time (no piece costs more than a few milliseconds of
   * tokenizing), so a server can let other streams run between pieces of a long prompt.
   */
  renderSteps?(input: PromptInput): Iterable<readonly number[]>;
  /**
   * A fresh parser for one generation. `toolNames` are the function tools of the request (bare names count).
   * `toolChoice` must be the one `render` saw: a forcing choice ends the prompt inside a tool call's opening, and the
   * parser must read that opening too.
   */
  /**
   * A parser for one response. `hostedTools`: the hosted tools the request declared (default none), which decide
   * whether a harmony call to `browser.*`, `python` or `server.tool` is a call item or plain text.
   */
  createParser(
    options: {
      readonly toolNames: readonly string[];
      readonly toolChoice?: ToolChoice;
      readonly hostedTools?: HostedTools;
    },
  ): OutputParser;
  /** Tokens that end generation (harmony: `<|return|>`, `<|call|>`; ChatML: `<|im_end|>`, EOS). */
  readonly stopTokens: readonly number[];
  /**
   * The text that closes one tool call, for formats where a call does not end the turn (ChatML `</tool_call>`): a
   * request allowing one call stops there. Absent where a call already ends generation (harmony `<|call|>`).
   */
  readonly toolCallEnd?: string;
  /** Where this format writes a constrained answer and a constrained call (structured outputs, strict tools). */
  readonly constraintLayout: ConstraintLayout;
}
