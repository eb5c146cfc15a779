/**
 * Token-level harmony (gpt-oss) output parser: one token per `push`, segments out (harmony.md §2, lenient design of
 * §2.8). Special tokens are looked up by text in the tokenizer, never by hard-coded id.
 *
 * States: `header` (collecting the tokens before `<|message|>`), `content` (an item is open and receives text),
 * `idle` (after a terminator, expecting `<|start|>`). Generation starts in `header` because the prompt ends with
 * `<|start|>assistant`. Leniency, so that no exception escapes and no model text is silently dropped:
 *  - idle: extra terminators and `<|endoftext|>` are no-ops; any other token opens an implicit header (so
 *    `<|end|>assistant<|channel|>…` and `<|end|><|channel|>…` work without `<|start|>`);
 *  - header: a header that ends without `<|message|>` (terminator, `<|start|>`, EOS) is recovered: its unrecognised
 *    words become the body of the item the rest of the header describes; `<|start|>` in a header restarts it, which
 *    drops a model-repeated `<|start|>assistant`;
 *  - content: `<|start|>` or `<|endoftext|>` closes the item implicitly; other specials are control tokens, never
 *    text, and are stripped (the UTF-8 decoder is flushed there so bytes cannot join across them).
 */
import type { Logprob } from "./logprob.ts";
import type { Tokenizer } from "../checkpoint/tokenizer.ts";
import type { CloseReason, ItemKind, OutputParser, Segment } from "./segment.ts";
import { type HarmonyHeader, HarmonyHeaderBuilder } from "./harmony_header.ts";
import { harmonyItemKind } from "./harmony_item_kind.ts";
import type { HostedTools } from "./hosted_tools.ts";
import { IncrementalDetokenizer } from "./detokenizer.ts";
import { clipLogprob } from "./clip_logprob.ts";

export interface HarmonyParserOptions {
  /** Function tools of the request: a bare recipient with one of these names is a function call. */
  readonly toolNames: readonly string[];
  /** Hosted tools the request declared; absent: every hosted call counts (see harmony_item_kind.ts). */
  readonly hostedTools?: HostedTools;
}

/** The control tokens the parser reacts to, resolved once per tokenizer; -1 when the vocabulary lacks one. */
interface HarmonyIds {
  readonly start: number;
  readonly end: number;
  readonly message: number;
  readonly channel: number;
  readonly constrain: number;
  readonly ret: number;
  readonly call: number;
  readonly endOfText: number;
}

const idCache = new WeakMap<Tokenizer, HarmonyIds>();

function harmonyIds(tokenizer: Tokenizer): HarmonyIds {
  let ids = idCache.get(tokenizer);
  if (ids === undefined) {
    const id = (text: string): number => tokenizer.specialId(text) ?? -1;
    ids = {
      start: id("<|start|>"),
      end: id("<|end|>"),
      message: id("<|message|>"),
      channel: id("<|channel|>"),
      constrain: id("<|constrain|>"),
      ret: id("<|return|>"),
      call: id("<|call|>"),
      endOfText: id("<|endoftext|>"),
    };
    idCache.set(tokenizer, ids);
  }
  return ids;
}

type State = "header" | "content" | "idle";

export class HarmonyParser implements OutputParser {
  readonly #tokenizer: Tokenizer;
  readonly #ids: HarmonyIds;
  /** Recipients a bare header word may name: the request's function tools. */
  readonly #toolNames: ReadonlySet<string>;
  readonly #hostedTools: HostedTools | undefined;

  #state: State = "header";
  #header = new HarmonyHeaderBuilder();
  /**
   * Header text since the last marker, and the open item's content: each decoder is flushed wherever bytes must not
   * join (a marker, the end of a header or message), so a character split across tokens survives and nothing leaks
   * from one message into the next.
   */
  readonly #headerText: IncrementalDetokenizer;
  readonly #decoder: IncrementalDetokenizer;
  #item: ItemKind | undefined;
  /**
   * Content text decoded while a character is still incomplete. It is held with the character, so a delta is always
   * the text of whole tokens: its logprobs are exactly the tokens whose bytes it holds, and a character that never
   * completes (U+FFFD at the message end) still goes out with the token that began it.
   */
  #heldText = "";
  /** Logprobs of the content tokens behind the held text; they ride on the next delta. */
  #pendingLogprobs: Logprob[] = [];
  /**
   * Logprobs of the current header's text tokens, each with where the header text it produced ends (one past it when
   * the token leaves a character unfinished: that character is its text too). A recovered body is a suffix of the
   * header text; it carries the logprobs of the tokens whose text reaches into it, like any other delta.
   */
  #headerLogprobs: {
    readonly logprob: Logprob;
    readonly text: string;
    readonly start: number;
    readonly end: number;
  }[] = [];

  constructor(tokenizer: Tokenizer, options: HarmonyParserOptions) {
    this.#tokenizer = tokenizer;
    this.#ids = harmonyIds(tokenizer);
    this.#toolNames = new Set(options.toolNames);
    this.#hostedTools = options.hostedTools;
    this.#headerText = new IncrementalDetokenizer(tokenizer);
    this.#decoder = new IncrementalDetokenizer(tokenizer);
  }

  get inReasoning(): boolean {
    return this.#state === "content" && this.#item?.type === "reasoning";
  }

  push(token: number, logprob?: Logprob): Segment[] {
    const out: Segment[] = [];
    switch (this.#state) {
      case "content":
        this.#pushContent(token, logprob, out);
        break;
      case "header":
        this.#pushHeader(token, logprob, out);
        break;
      case "idle":
        this.#pushIdle(token, logprob, out);
        break;
      default: {
        const never: never = this.#state;
        throw new Error(`Unreachable harmony parser state: ${String(never)}`);
      }
    }
    return out;
  }

  flush(): Segment[] {
    const out: Segment[] = [];
    if (this.#state === "content") this.#close("implicit", out);
    else if (this.#state === "header") this.#recoverHeader("implicit", out);
    this.#state = "header";
    this.#resetHeader();
    return out;
  }

  #isTerminator(token: number): CloseReason | undefined {
    const ids = this.#ids;
    if (token === ids.end) return "end";
    if (token === ids.call) return "call";
    if (token === ids.ret) return "return";
    if (token === ids.endOfText) return "implicit";
    return undefined;
  }

  #pushIdle(token: number, logprob: Logprob | undefined, out: Segment[]): void {
    if (this.#isTerminator(token) !== undefined) return; // a stray stop token after a message (harmony.md V14)
    this.#state = "header";
    this.#resetHeader();
    if (token !== this.#ids.start) this.#pushHeader(token, logprob, out);
  }

  #pushHeader(token: number, logprob: Logprob | undefined, out: Segment[]): void {
    const ids = this.#ids;
    if (token === ids.message) {
      this.#open(harmonyItemKind(this.#parseHeader(), this.#toolNames, this.#hostedTools), out);
      return;
    }
    const reason = this.#isTerminator(token);
    if (reason !== undefined) {
      this.#recoverHeader(reason, out);
      this.#state = "idle";
      return;
    }
    if (token === ids.start) {
      this.#recoverHeader("implicit", out);
      this.#state = "header";
      this.#resetHeader();
      return;
    }
    if (token === ids.channel) this.#headerMarker("channel");
    else if (token === ids.constrain) this.#headerMarker("constrain");
    else if (this.#tokenizer.isSpecial(token)) this.#headerMarker("other");
    else {
      const text = this.#headerText.push(token);
      if (logprob !== undefined) {
        const start = this.#header.textLength;
        const end = start + text.length + (this.#headerText.pending ? 1 : 0);
        this.#headerLogprobs.push({ logprob, text, start, end });
      }
      this.#header.appendText(text);
    }
  }

  #pushContent(token: number, logprob: Logprob | undefined, out: Segment[]): void {
    const reason = this.#isTerminator(token);
    if (reason !== undefined) {
      this.#close(reason, out);
      this.#state = "idle";
      return;
    }
    if (token === this.#ids.start) {
      this.#close("implicit", out);
      this.#state = "header";
      this.#resetHeader();
      return;
    }
    if (this.#tokenizer.isSpecial(token)) {
      this.#flushText(out);
      return;
    }
    if (logprob !== undefined) this.#pendingLogprobs.push(logprob);
    const text = this.#decoder.push(token);
    if (this.#decoder.pending) this.#heldText += text;
    else if (this.#heldText.length === 0) this.#delta(text, out);
    else this.#flushText(out, text);
  }

  /** Emits the held text, `text`, and whatever the decoder holds (as U+FFFD): bytes never join across this point. */
  #flushText(out: Segment[], text = ""): void {
    const held = this.#heldText;
    this.#heldText = "";
    this.#delta(held + text + this.#decoder.flush(), out);
  }

  #headerMarker(marker: "channel" | "constrain" | "other"): void {
    this.#header.appendText(this.#headerText.flush());
    this.#header.appendMarker(marker);
  }

  #parseHeader(): HarmonyHeader {
    this.#header.appendText(this.#headerText.flush());
    return this.#header.parse(this.#toolNames);
  }

  #resetHeader(): void {
    this.#header = new HarmonyHeaderBuilder();
    this.#headerText.flush(); // already clean: every path here has parsed or never started the previous header
    if (this.#headerLogprobs.length > 0) this.#headerLogprobs = [];
  }

  /** A header that never reached `<|message|>`: its unrecognised words are the body (harmony.md V16, §2.8). */
  #recoverHeader(reason: CloseReason, out: Segment[]): void {
    const header = this.#parseHeader();
    if (header.leftover.length === 0) return;
    this.#open(harmonyItemKind(header, this.#toolNames, this.#hostedTools), out);
    const bodyStart = this.#header.textLength - header.leftover.length;
    for (const { logprob, text, start, end } of this.#headerLogprobs) {
      // A token that also spelled header words before the body lists only its body text.
      if (end > bodyStart) this.#pendingLogprobs.push(clipLogprob(logprob, text, bodyStart - start, 0));
    }
    this.#headerLogprobs = [];
    this.#delta(header.leftover, out);
    this.#close(reason, out);
  }

  #open(item: ItemKind, out: Segment[]): void {
    this.#item = item;
    this.#decoder.flush(); // already clean: the previous item's close flushed it
    this.#heldText = "";
    this.#pendingLogprobs = [];
    this.#state = "content";
    out.push({ kind: "open", item });
  }

  #delta(text: string, out: Segment[]): void {
    if (text.length === 0) return;
    if (this.#pendingLogprobs.length === 0) {
      out.push({ kind: "delta", text });
    } else {
      out.push({ kind: "delta", text, logprobs: this.#pendingLogprobs });
      this.#pendingLogprobs = [];
    }
  }

  #close(reason: CloseReason, out: Segment[]): void {
    this.#flushText(out);
    this.#pendingLogprobs = [];
    this.#item = undefined;
    this.#state = "idle";
    out.push({ kind: "close", reason });
  }
}
