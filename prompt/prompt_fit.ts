/**
 * Renders a conversation into prompt tokens that fit the context, without ever holding the event loop for long.
 *
 * Before the exact render (the chat format's, synchronous), the messages' text is counted newest first in slices
 * of at most SLICE_CHARS, yielding to the event loop every few milliseconds of work (LoopYielder), and counting stops as soon as what is
 * left cannot fit:
 * - `truncation: "disabled"`: a conversation whose count already exceeds the context is refused without ever
 *   tokenizing the rest (a 16 MB input costs a few thousand tokens of work, not 16 MB of it);
 * - `truncation: "auto"`: the newest messages that fit are kept (system and developer messages always), older ones
 *   are dropped uncounted, so truncation is one linear pass plus one exact render, where dropping one message per
 *   render was quadratic. Should the exact render still be too long (the count is a lower bound: it leaves out
 *   template text and reasoning a format may drop), the oldest kept messages go until it fits.
 *
 * Invariant: the count is a lower bound of the exact prompt length, so "disabled" never refuses a prompt that fits.
 * The exact render runs a piece at a time with yields in between when the format offers `renderSteps` (harmony);
 * a format without it renders in one call, bounded by the context length.
 */
import type { ChatFormat } from "./chat_format.ts";
import type { ConversationMessage, PromptInput } from "./conversation.ts";
import type { Tokenizer } from "../checkpoint/tokenizer.ts";
import { contextLengthExceeded } from "./errors.ts";
import { LoopYielder } from "./loop_yield.ts";

/** Longest text encoded in one call. */
const SLICE_CHARS = 16 * 1024;

/** Counts tokens of texts in slices, yielding between them; a lower bound of their piecewise encoding. */
export class TokenCounter {
  readonly #tokenizer: Tokenizer;
  readonly #loop: LoopYielder;

  constructor(tokenizer: Tokenizer, loop: LoopYielder) {
    this.#tokenizer = tokenizer;
    this.#loop = loop;
  }

  /** Tokens of `text`, or a number above `cap` once more than `cap` were counted (the rest is not encoded). */
  async count(text: string, cap: number): Promise<number> {
    let n = 0;
    for (let at = 0; at < text.length && n <= cap;) {
      const end = sliceEnd(text, at);
      // Splitting before a space that starts a word splits where byte-level pre-tokenizers split too; a slice
      // boundary may still cost or save a token elsewhere, which the caller's margin absorbs.
      n += this.#tokenizer.encodeOrdinary(text.slice(at, end)).length;
      at = end;
      await this.#loop.maybeYield();
    }
    return n;
  }
}

/** The end of the slice starting at `at`: SLICE_CHARS on, moved back to a space before a non-space if one is near. */
function sliceEnd(text: string, at: number): number {
  const end = at + SLICE_CHARS;
  if (end >= text.length) return text.length;
  for (let i = end; i > end - 256; i--) {
    if (text.charCodeAt(i) === 32 && text.charCodeAt(i + 1) > 32) return i;
  }
  // Never split a surrogate pair.
  const c = text.charCodeAt(end - 1);
  return c >= 0xd800 && c <= 0xdbff ? end + 1 : end;
}

/** The text of a message that every format renders (reasoning is left out: formats drop earlier turns'). */
function countedTexts(message: ConversationMessage): string[] {
  if (message.role === "assistant") return [message.content, ...(message.toolCalls ?? []).map((c) => c.arguments)];
  return [message.content];
}

/** Tokens a count may exceed the exact encoding by: one per slice boundary, and two for the text's edges. */
function slack(message: ConversationMessage): number {
  let chars = 0;
  for (const text of countedTexts(message)) chars += text.length;
  return 2 + Math.ceil(chars / SLICE_CHARS);
}

const isPinned = (m: ConversationMessage) => m.role === "system" || m.role === "developer";

export interface FittedPrompt {
  readonly prompt: PromptInput;
  readonly tokens: number[];
}

/**
 * The prompt's tokens, leaving at least one token of room to generate; a 400 `context_length_exceeded` naming
 * `param` when it cannot fit (with "disabled", or when even the newest message alone is too long).
 */
export async function fitPrompt(
  format: ChatFormat,
  tokenizer: Tokenizer,
  input: PromptInput,
  maxModelLen: number,
  truncation: "auto" | "disabled",
  param: string,
  loop: LoopYielder = new LoopYielder(),
): Promise<FittedPrompt> {
  // The request's body was just read and parsed in one go: let other streams run before counting starts.
  await loop.yield();
  const counter = new TokenCounter(tokenizer, loop);
  const budget = maxModelLen - 1;
  /** A lower bound of the tokens of what is kept so far. */
  let lower = 0;
  const lowerBound = async (texts: readonly string[], slack: number): Promise<number> => {
    let n = 0;
    for (const text of texts) {
      if (n - slack > budget - lower) break;
      n += await counter.count(text, budget - lower + slack - n + 1);
    }
    return Math.max(0, n - slack);
  };
  const messages = input.messages;
  // Instructions and pinned messages first: they are never dropped.
  lower += await lowerBound([input.instructions ?? ""], 2);
  for (const m of messages) if (isPinned(m)) lower += await lowerBound(countedTexts(m), slack(m));
  if (lower > budget) throw contextLengthExceeded(lower, maxModelLen, param, true);
  let keepFrom = messages.length;
  /** Lower bounds of the kept messages' tokens, by message. */
  const counts = new Map<ConversationMessage, number>();
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i]!;
    if (isPinned(m)) continue;
    const n = await lowerBound(countedTexts(m), slack(m));
    counts.set(m, n);
    if (lower + n > budget) {
      if (truncation === "disabled" || keepFrom === messages.length) {
        throw contextLengthExceeded(lower + n, maxModelLen, param, true);
      }
      break;
    }
    lower += n;
    keepFrom = i;
  }
  let kept = keep(messages, keepFrom);
  for (;;) {
    const prompt = kept.length === messages.length ? input : { ...input, messages: kept };
    const tokens = await render(format, prompt, loop);
    if (tokens.length < maxModelLen) return { prompt, tokens };
    if (truncation === "disabled") throw contextLengthExceeded(tokens.length, maxModelLen, param);
    // Drop as many of the oldest messages as the overshoot needs by their counts (plus a token of markup each),
    // so a low count costs one or two more renders, not one render per message.
    let over = tokens.length - budget;
    let dropped = 0;
    while (over > 0) {
      const at = kept.findIndex((m) => !isPinned(m));
      if (at < 0) break;
      const end = dropEnd(kept, at);
      if (end >= kept.length) break;
      for (const m of kept.slice(at, end)) over -= (counts.get(m) ?? 0) + 1;
      kept = [...kept.slice(0, at), ...kept.slice(end)];
      dropped++;
    }
    if (dropped === 0) throw contextLengthExceeded(tokens.length, maxModelLen, param);
  }
}

/** The format's tokens, a piece at a time with turns of the event loop in between where the format allows. */
async function render(format: ChatFormat, prompt: PromptInput, loop: LoopYielder): Promise<number[]> {
  await loop.maybeYield();
  if (format.renderSteps === undefined) return format.render(prompt);
  const tokens: number[] = [];
  for (const step of format.renderSteps(prompt)) {
    for (const id of step) tokens.push(id);
    await loop.maybeYield();
  }
  return tokens;
}

/** Pinned messages, then the others from index `from` on, without tool results whose call was dropped. */
function keep(messages: readonly ConversationMessage[], from: number): ConversationMessage[] {
  const out: ConversationMessage[] = [];
  let leading = true;
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i]!;
    if (isPinned(m)) {
      out.push(m);
      continue;
    }
    if (i < from) continue;
    if (leading && m.role === "tool" && from > 0) continue;
    leading = false;
    out.push(m);
  }
  return out;
}

/**
 * The end of the oldest message at `at` together with the tool results that answered it. The caller never drops
 * up to the end: the newest message is what the model answers.
 */
function dropEnd(messages: readonly ConversationMessage[], at: number): number {
  let end = at + 1;
  while (messages[end]?.role === "tool") end++;
  return end;
}
