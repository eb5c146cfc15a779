/**
 * Lenient parsing of one harmony message header (the tokens between `<|start|>` and `<|message|>`), following
 * harmony.md §2.3 with the fixes of §2.8:
 *  - the recipient may come before or after the channel; a duplicated `to=` is accepted (the last one wins), and
 *    `to= X` (space after `=`) still names X;
 *  - `json`, `code` and `<|constrain|>…` are content types even when they are the only part (so `final json` is not
 *    a call to a tool named "json");
 *  - a duplicated role word is dropped; a bare word is a recipient only if it contains `.` or is a known tool name;
 *  - anything else is "leftover": header noise when `<|message|>` follows, the recovered body when it never does.
 * Special tokens arrive as markers, never as text, so text that merely spells `<|channel|>` cannot be misread.
 */

export interface HarmonyHeader {
  readonly role?: string;
  readonly channel?: string;
  readonly recipient?: string;
  readonly contentType?: string;
  /** Header text from the first unrecognised word to the end, verbatim ("" when every word was understood). */
  readonly leftover: string;
}

/** Special tokens that structure a header; any other special inside a header only separates words. */
export type HeaderMarker = "channel" | "constrain" | "other";

const ROLES: ReadonlySet<string> = new Set(["assistant", "user", "system", "developer", "tool"]);
const CHANNELS: ReadonlySet<string> = new Set(["analysis", "commentary", "final"]);
const CONTENT_TYPES: ReadonlySet<string> = new Set(["json", "code"]);
const WHITESPACE = /\s/;

type Word =
  | { readonly kind: "text"; readonly text: string; readonly start: number }
  | { readonly kind: "marker"; readonly marker: HeaderMarker };

/**
 * Collects a header as text runs and markers. Text offsets refer to the concatenation of all text runs, which is
 * what `leftover` slices, so a recovered body keeps its original spacing.
 */
export class HarmonyHeaderBuilder {
  #text = "";
  readonly #words: Word[] = [];
  #wordStart = -1;

  /** Length of the header text collected so far (the coordinate system of `leftover`). */
  get textLength(): number {
    return this.#text.length;
  }

  appendText(text: string): void {
    for (let i = 0; i < text.length; i++) {
      const at = this.#text.length + i;
      if (WHITESPACE.test(text[i]!)) {
        this.#endWord(at);
      } else if (this.#wordStart < 0) {
        this.#wordStart = at;
      }
    }
    this.#text += text;
  }

  appendMarker(marker: HeaderMarker): void {
    this.#endWord(this.#text.length);
    this.#words.push({ kind: "marker", marker });
  }

  parse(knownRecipients: ReadonlySet<string>): HarmonyHeader {
    this.#endWord(this.#text.length);
    return parseWords(this.#words, this.#text, knownRecipients);
  }

  #endWord(end: number): void {
    if (this.#wordStart < 0) return;
    this.#words.push({ kind: "text", text: this.#text.slice(this.#wordStart, end), start: this.#wordStart });
    this.#wordStart = -1;
  }
}

function isChannelPrefix(word: string): boolean {
  for (const c of CHANNELS) if (c.startsWith(word)) return true;
  return false;
}

function isBareRecipient(word: string, known: ReadonlySet<string>): boolean {
  return known.has(word) || (word.includes(".") && !word.startsWith(".") && !word.endsWith("."));
}

function parseWords(words: readonly Word[], text: string, known: ReadonlySet<string>): HarmonyHeader {
  let role: string | undefined;
  let channel: string | undefined;
  let recipient: string | undefined;
  let contentType: string | undefined;
  let leftoverStart = -1;
  const hasChannelMarker = words.some((w) => w.kind === "marker" && w.marker === "channel");
  let sawText = false;
  let recipientNext = false;

  for (let i = 0; i < words.length; i++) {
    const word = words[i]!;
    if (word.kind === "marker") {
      recipientNext = false;
      const next = words[i + 1];
      if (word.marker === "channel") {
        if (next?.kind === "text") {
          channel ??= next.text;
          // A word that is no channel (`analysis000…`, the model writing on without a `<|message|>`) is kept: it is
          // the body if the header never ends with `<|message|>`.
          // A prefix of a channel name is a header cut off by the end of output, not a body.
          if (!CHANNELS.has(next.text) && !isChannelPrefix(next.text) && leftoverStart < 0) leftoverStart = next.start;
          i++;
        }
      } else if (word.marker === "constrain") {
        contentType = next?.kind === "text" ? `<|constrain|>${next.text}` : "<|constrain|>";
        if (next?.kind === "text") i++;
      }
      continue;
    }
    const w = word.text;
    const first = !sawText;
    sawText = true;
    if (recipientNext) {
      recipient = w;
      recipientNext = false;
    } else if (w.startsWith("to=")) {
      if (w.length > 3) recipient = w.slice(3);
      else recipientNext = true;
    } else if (first && ROLES.has(w)) {
      role = w;
    } else if (w === "assistant") {
      // A duplicated role word (the model repeating the prefilled `<|start|>assistant`).
    } else if (!hasChannelMarker && channel === undefined && CHANNELS.has(w)) {
      channel = w;
    } else if (CONTENT_TYPES.has(w)) {
      contentType ??= w;
    } else if (recipient === undefined && isBareRecipient(w, known)) {
      recipient = w;
    } else if (leftoverStart < 0) {
      leftoverStart = word.start;
    }
  }

  return {
    ...(role !== undefined ? { role } : {}),
    ...(channel !== undefined ? { channel } : {}),
    ...(recipient !== undefined ? { recipient } : {}),
    ...(contentType !== undefined ? { contentType } : {}),
    leftover: leftoverStart < 0 ? "" : text.slice(leftoverStart),
  };
}
