/**
 * Output parser for ChatML models with `<think>` reasoning and Hermes/Qwen `<tool_call>` JSON calls (Qwen2.5/3,
 * Hermes, and friends).
 *
 * Pipeline per token: control specials are handled by id (stop tokens end the output, others are invisible); every
 * other token goes through the incremental detokenizer, and the decoded text is scanned for markers with a
 * `MarkerScanner` whose marker set depends on the mode (text, reasoning, tool call). Markers are recognised by
 * their text, so it makes no difference whether the model produced `<think>` as one special token or as plain text
 * cut across several tokens; a partial marker is held back (only the minimal ambiguous suffix) until it resolves.
 *
 * Items produced, in whatever order the model writes them: reasoning (`<think>`…`</think>`), message (text outside
 * markup), function_call (one per `<tool_call>` whose JSON names a requested tool; the arguments stream as they
 * arrive). Tool markup never reaches message text — unless the call is not a call (malformed JSON before the name,
 * unknown tool, no tools requested), in which case the raw text, markers included, becomes message text unchanged.
 *
 * Whitespace rules (what users of Qwen3-style templates expect):
 * - Reasoning: one "\n" right after `<think>` and one "\n" right before `</think>` are dropped.
 * - Message: a message item opens at its first non-whitespace character, so whitespace between items
 *   (`</think>\n\n`, `</tool_call>\n<tool_call>`) never creates a blank message; trailing whitespace directly before
 *   a marker that ends the message is dropped. Whitespace inside a message, and at the very end of output, is kept.
 * - Tool call: whitespace around the JSON object is structural and dropped.
 * - A stray `</think>` or `</tool_call>` outside its block is dropped and ends the current message.
 *
 * Logprobs (message text only; reasoning and call arguments have none on the wire): the trim happens in the text, and
 * a logprob's `token` (and `bytes`) is trimmed the same way, so a message's logprob tokens always concatenate to its
 * text: a token whose text is partly outside the item (dropped edge whitespace, markup, the previous item's text)
 * lists only the part this item shows (` is` opening a message reads `is`; `.\n\n` before a marker reads `.`); its
 * `logprob` and `top_logprobs` are the sampled token's, unchanged. A token's logprob is attached to
 * the first message delta whose text overlaps the token's decoded text, so a held-back token's logprob travels with
 * the delta that finally carries its text. A token that began a character still pending owns that character. A
 * message delta that ends inside a token's text is held until the rest of that text is either shown (then both go
 * out as one delta) or dropped (whitespace before a marker, the end of the message), so every message delta carries
 * at least one logprob and each token's logprob appears once per item (a token whose text spans two items, possible
 * only with plain-text markers, is listed in both). Tokens that decode entirely to markup, dropped
 * whitespace, reasoning or tool-call JSON carry no logprob in any delta.
 *
 * Malformed output never throws: after a call has opened, a JSON error closes the call (with every arguments
 * character before the error) and the raw text from the offending character on, closing marker included, becomes
 * message text. Known limit: JSON structure consumed between the arguments and the error (e.g. `, "x" ` in
 * `{"name": "f", "arguments": {}, "x" "y"}`) is not repeated in the message.
 */
import type { Logprob } from "./logprob.ts";
import { clipLogprob } from "./clip_logprob.ts";
import type { Tokenizer } from "../checkpoint/tokenizer.ts";
import { IncrementalDetokenizer } from "./detokenizer.ts";
import { MarkerScanner } from "./marker_scanner.ts";
import type { CloseReason, ItemKind, OutputParser, Segment } from "./segment.ts";
import { ToolCallScanner } from "./tool_call_scanner.ts";

export interface ChatmlParserOptions {
  readonly reasoningStart?: string;
  readonly reasoningEnd?: string;
  /** The prompt already opened reasoning (e.g. Qwen3 templates ending with `<think>\n`). */
  readonly startInReasoning?: boolean;
  readonly toolCallStart?: string;
  readonly toolCallEnd?: string;
  /** Function tools of the request. With none, tool-call markup is plain text. */
  readonly toolNames: readonly string[];
  /** Texts of control tokens that end the output. Default `<|im_end|>`, `<|endoftext|>`. */
  readonly stopTexts?: readonly string[];
}

const enum Mode {
  Text,
  Reasoning,
  ToolCall,
  /** Inside a tool-call block that turned out not to be a call: its text is message text. */
  ToolRaw,
  Ended,
}

const enum Open {
  None,
  Message,
  Reasoning,
  Call,
}

/** What a marker means, per mode. */
const enum Act {
  ReasoningStart,
  ReasoningEnd,
  ToolCallStart,
  ToolCallEnd,
}

interface PendingLogprob {
  readonly logprob: Logprob;
  /** The token's decoded text, which spans [start, end) of the output text. */
  readonly text: string;
  readonly start: number;
  readonly end: number;
}

const MESSAGE: ItemKind = { type: "message" };
const REASONING: ItemKind = { type: "reasoning" };

function isWs(c: number): boolean {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
}

export class ChatmlParser implements OutputParser {
  readonly #tokenizer: Tokenizer;
  readonly #detok: IncrementalDetokenizer;
  readonly #tools: ReadonlySet<string>;
  readonly #stopIds = new Set<number>();
  readonly #markerIds = new Set<number>();
  readonly #reasoningStart: string;
  readonly #toolCallStart: string;
  readonly #toolCallEnd: string;
  readonly #scanners: Record<Mode.Text | Mode.Reasoning | Mode.ToolCall, { scanner: MarkerScanner; acts: Act[] }>;

  #mode: Mode;
  #open = Open.None;
  #out: Segment[] = [];
  /** Global offset (in UTF-16 units of decoded text) of the first character not yet fed to the scanner. */
  #pos = 0;
  #held = "";
  #heldPos = 0;
  // Message whitespace held at the end of an open message.
  #pendingWs = "";
  #pendingWsPos = 0;
  // Reasoning.
  #stripNewline = false;
  #reasoningHasText = false;
  // Tool call.
  #call = new ToolCallScanner();
  #callMarker = "";
  #callMarkerPos = 0;
  #callRaw = "";
  #callOpened = false;
  #callArgs = "";
  #rawEmitsEnd = true;
  // Logprobs awaiting the delta that carries their text.
  #logprobs: PendingLogprob[] = [];
  #logprobHead = 0;
  /** End offset of the text of the tokens attached so far, and the last of those tokens. */
  #attachedEnd = 0;
  #lastAttached: PendingLogprob | undefined;
  /** A message delta that ends (at `end`) inside a token's text, waiting for the rest of it. */
  #heldDelta: { text: string; logprobs: Logprob[]; end: number } | null = null;

  constructor(tokenizer: Tokenizer, options: ChatmlParserOptions) {
    this.#tokenizer = tokenizer;
    this.#detok = new IncrementalDetokenizer(tokenizer);
    this.#tools = new Set(options.toolNames);
    this.#reasoningStart = options.reasoningStart ?? "<think>";
    const reasoningEnd = options.reasoningEnd ?? "</think>";
    this.#toolCallStart = options.toolCallStart ?? "<tool_call>";
    this.#toolCallEnd = options.toolCallEnd ?? "</tool_call>";
    this.#mode = options.startInReasoning === true ? Mode.Reasoning : Mode.Text;
    for (const t of options.stopTexts ?? ["<|im_end|>", "<|endoftext|>"]) {
      const id = tokenizer.specialId(t);
      if (id !== undefined) this.#stopIds.add(id);
    }
    const toolsOn = this.#tools.size > 0;
    const text: [string, Act][] = [[this.#reasoningStart, Act.ReasoningStart], [reasoningEnd, Act.ReasoningEnd]];
    if (toolsOn) text.push([this.#toolCallStart, Act.ToolCallStart], [this.#toolCallEnd, Act.ToolCallEnd]);
    const reasoning: [string, Act][] = [
      ["\n" + reasoningEnd, Act.ReasoningEnd],
      [reasoningEnd, Act.ReasoningEnd],
      [this.#reasoningStart, Act.ReasoningStart],
    ];
    const call: [string, Act][] = [[this.#toolCallEnd, Act.ToolCallEnd]];
    const build = (pairs: [string, Act][]) => ({
      scanner: new MarkerScanner(pairs.map((p) => p[0])),
      acts: pairs.map((p) => p[1]),
    });
    this.#scanners = { [Mode.Text]: build(text), [Mode.Reasoning]: build(reasoning), [Mode.ToolCall]: build(call) };
    // Marker tokens decode to their text even when they are control tokens: with tools off, a `<tool_call>` token
    // is plain text, never silently dropped.
    for (const m of [this.#reasoningStart, reasoningEnd, this.#toolCallStart, this.#toolCallEnd]) {
      const id = tokenizer.specialId(m);
      if (id !== undefined) this.#markerIds.add(id);
    }
  }

  get inReasoning(): boolean {
    return this.#mode === Mode.Reasoning;
  }

  push(token: number, logprob?: Logprob): Segment[] {
    const out: Segment[] = [];
    if (this.#mode === Mode.Ended) return out;
    this.#out = out;
    if (this.#stopIds.has(token)) {
      this.#finish(true);
      return out;
    }
    if (this.#tokenizer.isSpecial(token) && !this.#markerIds.has(token)) return out; // invisible control token
    const text = this.#detok.push(token);
    if (logprob !== undefined) {
      const end = this.#pos + text.length + (this.#detok.pending ? 1 : 0);
      this.#logprobs.push({ logprob, text, start: this.#pos, end });
    }
    if (text.length > 0) this.#feed(text);
    return out;
  }

  flush(): Segment[] {
    const out: Segment[] = [];
    if (this.#mode === Mode.Ended) return out;
    this.#out = out;
    this.#finish(false);
    return out;
  }

  // ---- text scanning ------------------------------------------------------------------------------------------

  #feed(text: string): void {
    let buf: string;
    let base: number;
    if (this.#held.length > 0) {
      buf = this.#held + text;
      base = this.#heldPos;
      this.#held = "";
    } else {
      buf = text;
      base = this.#pos;
    }
    this.#pos += text.length;
    let i = 0;
    while (i < buf.length) {
      const { scanner, acts } = this.#scannerFor();
      const at = scanner.find(buf, i);
      if (at >= 0) {
        const marker = scanner.markers[scanner.matched]!;
        this.#text(buf, i, at, base);
        i = at + marker.length;
        this.#marker(acts[scanner.matched]!, marker, base + at);
        continue;
      }
      const hold = scanner.holdStart(buf, i);
      this.#text(buf, i, hold, base);
      if (hold < buf.length) {
        this.#held = buf.slice(hold);
        this.#heldPos = base + hold;
      }
      break;
    }
  }

  #scannerFor(): { scanner: MarkerScanner; acts: Act[] } {
    switch (this.#mode) {
      case Mode.Text:
        return this.#scanners[Mode.Text];
      case Mode.Reasoning:
        return this.#scanners[Mode.Reasoning];
      case Mode.ToolCall:
      case Mode.ToolRaw:
      case Mode.Ended:
        return this.#scanners[Mode.ToolCall];
      default: {
        const never: never = this.#mode;
        return never;
      }
    }
  }

  /** Routes buf[from, to) (global offset base + from) to the current mode. */
  #text(buf: string, from: number, to: number, base: number): void {
    if (to <= from) return;
    const s = from === 0 && to === buf.length ? buf : buf.slice(from, to);
    const pos = base + from;
    switch (this.#mode) {
      case Mode.Text:
      case Mode.ToolRaw:
        this.#messageText(s, pos);
        return;
      case Mode.Reasoning:
        this.#reasoningText(s, pos);
        return;
      case Mode.ToolCall:
        this.#callText(s, pos);
        return;
      case Mode.Ended:
        return;
      default: {
        const never: never = this.#mode;
        return never;
      }
    }
  }

  #marker(act: Act, marker: string, pos: number): void {
    switch (this.#mode) {
      case Mode.Text:
        this.#textMarker(act, marker, pos);
        return;
      case Mode.Reasoning:
        if (act === Act.ReasoningStart) {
          if (this.#reasoningHasText) this.#reasoningText(marker, pos);
          else this.#stripNewline = true;
          return;
        }
        this.#openReasoning();
        this.#close("end", true);
        this.#mode = Mode.Text;
        return;
      case Mode.ToolCall:
        if (this.#callOpened) {
          this.#endCall("end");
        } else {
          this.#degradeCall();
          this.#messageText(marker, pos);
          this.#mode = Mode.Text;
        }
        return;
      case Mode.ToolRaw:
        if (this.#rawEmitsEnd) this.#messageText(marker, pos);
        else this.#flushPendingWs(); // a hidden marker inside the message: text on both sides of it stays apart
        this.#mode = Mode.Text;
        return;
      case Mode.Ended:
        return;
      default: {
        const never: never = this.#mode;
        return never;
      }
    }
  }

  /** A marker seen outside any block. */
  #textMarker(act: Act, marker: string, pos: number): void {
    switch (act) {
      case Act.ReasoningStart:
        this.#close("end", true);
        this.#mode = Mode.Reasoning;
        this.#openReasoning();
        this.#stripNewline = true;
        return;
      case Act.ToolCallStart:
        // The message stays open until the call proves real: if it degrades to text, it continues the message.
        this.#mode = Mode.ToolCall;
        this.#callMarker = marker;
        this.#callMarkerPos = pos;
        this.#callRaw = "";
        this.#callOpened = false;
        this.#callArgs = "";
        this.#call = new ToolCallScanner();
        return;
      case Act.ReasoningEnd:
      case Act.ToolCallEnd:
        this.#close("end", true);
        return;
      default: {
        const never: never = act;
        return never;
      }
    }
  }

  // ---- items --------------------------------------------------------------------------------------------------

  #messageText(s: string, pos: number): void {
    let a = 0;
    let e = s.length;
    if (this.#open !== Open.Message) {
      while (a < e && isWs(s.charCodeAt(a))) a++;
      if (a === e) return;
      this.#close("end", true);
      this.#openItem(Open.Message, MESSAGE);
    }
    while (e > a && isWs(s.charCodeAt(e - 1))) e--;
    if (e === a) {
      if (this.#pendingWs.length === 0) this.#pendingWsPos = pos;
      this.#pendingWs += s;
      return;
    }
    const body = a === 0 && e === s.length ? s : s.slice(a, e);
    let text = body;
    let start = pos + a;
    if (this.#pendingWs.length > 0) {
      text = this.#pendingWs + body;
      start = this.#pendingWsPos;
    }
    this.#pendingWs = e === s.length ? "" : s.slice(e);
    this.#pendingWsPos = pos + e;
    this.#delta(text, start, pos + e);
  }

  #reasoningText(s: string, pos: number): void {
    if (this.#stripNewline) {
      this.#stripNewline = false;
      if (s.charCodeAt(0) === 0x0a) {
        s = s.slice(1);
        pos++;
        if (s.length === 0) return;
      }
    }
    this.#openReasoning();
    this.#reasoningHasText = true;
    this.#skipLogprobs(pos + s.length);
    this.#out.push({ kind: "delta", text: s });
  }

  #openReasoning(): void {
    if (this.#open === Open.Reasoning) return;
    this.#close("end", true);
    this.#openItem(Open.Reasoning, REASONING);
    this.#reasoningHasText = false;
  }

  #callText(s: string, pos: number): void {
    if (!this.#callOpened) this.#callRaw += s;
    let i = 0;
    while (i < s.length && this.#mode === Mode.ToolCall) {
      i = this.#call.scan(s, i);
      const args = this.#call.takeArgs();
      const status = this.#call.status;
      if (!this.#callOpened) {
        if (status === "failed") return this.#degradeCall();
        this.#callArgs += args;
        const name = this.#call.name;
        if (name !== undefined) {
          if (!this.#tools.has(name)) return this.#degradeCall();
          this.#pendingWs = "";
          this.#close("end", false);
          this.#openItem(Open.Call, { type: "function_call", name });
          this.#callOpened = true;
          if (this.#callArgs.length > 0) this.#delta(this.#callArgs, -1, -1);
          this.#callArgs = "";
        } else if (status === "done") {
          return this.#degradeCall();
        }
      } else if (args.length > 0) {
        this.#delta(args, -1, -1);
      }
      if (this.#callOpened && i < s.length && (status === "failed" || status === "done")) {
        // Text after a broken or finished object is not part of the call: it becomes message text.
        this.#endCall("end");
        this.#mode = Mode.ToolRaw;
        this.#rawEmitsEnd = status === "failed";
        this.#messageText(s.slice(i), pos + i);
        return;
      }
    }
  }

  /** The block is not a call: everything since its start marker, verbatim, is message text. */
  #degradeCall(): void {
    this.#mode = Mode.ToolRaw;
    this.#rawEmitsEnd = true;
    this.#messageText(this.#callMarker + this.#callRaw, this.#callMarkerPos);
    this.#callRaw = "";
  }

  /** Ends the open function_call (closing marker, trailing text, or end of output). */
  #endCall(reason: CloseReason): void {
    if (!this.#call.argsStarted) this.#delta("{}", -1, -1);
    this.#close(reason, false);
    this.#callOpened = false;
    this.#mode = Mode.Text;
  }

  #finish(atStop: boolean): void {
    const tail = this.#held + this.#detok.flush();
    const tailPos = this.#held.length > 0 ? this.#heldPos : this.#pos;
    this.#held = "";
    // The tail cannot contain a marker (complete markers are never held), so it is plain text of the current mode.
    if (tail.length > 0) this.#text(tail, 0, tail.length, tailPos);
    if (this.#mode === Mode.ToolCall) {
      if (this.#callOpened) this.#endCall("implicit");
      else this.#degradeCall();
    }
    this.#flushPendingWs();
    this.#close(atStop && this.#open === Open.Message ? "end" : "implicit", true);
    this.#mode = Mode.Ended;
  }

  /** Sends the whitespace held at the end of the open message as message text. */
  #flushPendingWs(): void {
    if (this.#pendingWs.length === 0 || this.#open !== Open.Message) return;
    const ws = this.#pendingWs;
    this.#pendingWs = "";
    this.#delta(ws, this.#pendingWsPos, this.#pendingWsPos + ws.length);
  }

  #openItem(kind: Open, item: ItemKind): void {
    this.#releaseDelta();
    this.#open = kind;
    this.#out.push({ kind: "open", item });
  }

  /** Closes the open item, if any. `dropWs`: trailing message whitespace held before a marker is discarded. */
  #close(reason: CloseReason, dropWs: boolean): void {
    if (dropWs) this.#pendingWs = "";
    this.#releaseDelta();
    if (this.#open === Open.None) return;
    this.#open = Open.None;
    this.#out.push({ kind: "close", reason });
  }

  /** Emits a delta for decoded text [start, end); start < 0 means text that carries no logprobs (call JSON). */
  #delta(text: string, start: number, end: number): void {
    if (start < 0) {
      this.#out.push({ kind: "delta", text });
      return;
    }
    let taken = this.#logprobHead < this.#logprobs.length ? this.#takeLogprobs(start, end) : undefined;
    let held = this.#heldDelta;
    if (taken === undefined && held === null && start < this.#attachedEnd && this.#lastAttached !== undefined) {
      // The rest of a token whose text began in the previous item: it produced this item's text too.
      const last = this.#lastAttached;
      taken = [clipLogprob(last.logprob, last.text, start - last.start, 0)];
    }
    if (held !== null) {
      held.text += text;
      held.end = end;
      if (taken !== undefined) { for (const l of taken) held.logprobs.push(l); }
    } else if (taken !== undefined && this.#attachedEnd > end) {
      held = this.#heldDelta = { text, logprobs: taken, end };
    }
    if (held === null) {
      this.#out.push(taken === undefined ? { kind: "delta", text } : { kind: "delta", text, logprobs: taken });
    } else if (this.#attachedEnd <= end) {
      this.#releaseDelta();
    }
  }

  /** Sends the held message delta: the rest of its last token's text was dropped, or has just been appended. */
  #releaseDelta(): void {
    const held = this.#heldDelta;
    if (held === null) return;
    this.#heldDelta = null;
    // The rest of the last token's text was dropped: its logprob lists only what was shown.
    const cut = this.#attachedEnd - held.end;
    const last = this.#lastAttached;
    if (cut > 0 && last !== undefined && held.logprobs.length > 0) {
      const i = held.logprobs.length - 1;
      if (held.logprobs[i] === last.logprob) held.logprobs[i] = clipLogprob(last.logprob, last.text, 0, cut);
    }
    this.#out.push({ kind: "delta", text: held.text, logprobs: held.logprobs });
  }

  /** Drops the logprobs of tokens whose text ends by `end` (text that is not message text). */
  #skipLogprobs(end: number): void {
    const q = this.#logprobs;
    while (this.#logprobHead < q.length && q[this.#logprobHead]!.end <= end) this.#logprobHead++;
    this.#compactLogprobs();
  }

  #takeLogprobs(start: number, end: number): Logprob[] | undefined {
    let taken: Logprob[] | undefined;
    const q = this.#logprobs;
    while (this.#logprobHead < q.length) {
      const p = q[this.#logprobHead]!;
      // A token that decoded to nothing yet (part of a character) belongs with the character that starts there.
      const pEnd = p.end > p.start ? p.end : p.start + 1;
      if (pEnd <= start) {
        this.#logprobHead++; // its text was all markup or dropped whitespace
        continue;
      }
      if (p.start >= end) break;
      (taken ??= []).push(clipLogprob(p.logprob, p.text, start - p.start, 0));
      this.#attachedEnd = pEnd;
      this.#lastAttached = p;
      this.#logprobHead++;
    }
    this.#compactLogprobs();
    return taken;
  }

  #compactLogprobs(): void {
    if (this.#logprobHead > 256 && this.#logprobHead * 2 > this.#logprobs.length) {
      this.#logprobs.splice(0, this.#logprobHead);
      this.#logprobHead = 0;
    }
  }
}
