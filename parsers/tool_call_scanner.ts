/**
 * Incremental scanner for the JSON body of a Hermes/Qwen tool call: `{"name": "...", "arguments": ...}`.
 *
 * It reads the body one chunk at a time, learns the function name as soon as its string closes, and yields the
 * arguments JSON text as it arrives so the caller can stream it:
 * - `arguments` given as an object/array/literal: its raw text, byte for byte as the model wrote it;
 * - `arguments` given as a JSON string that contains JSON: the decoded string contents (escapes resolved; a partial
 *   escape or an unpaired high surrogate is held until the next chunk so no delta ends mid-character).
 * `parameters` is accepted as a synonym of `arguments`; other keys are skipped.
 *
 * Invariant: the outcome (name, arguments text, where it failed or ended) depends only on the concatenated input,
 * never on how it is chunked. `scan` pauses right after the name closes so the caller can open the call before any
 * later character (including a failure) is seen — that keeps the caller's decisions chunking-independent too.
 * Nothing throws: malformed input moves to `failed` and reports where.
 */

export type ToolCallScanStatus =
  /** More input expected. */
  | "scanning"
  /** The top-level object closed. */
  | "done"
  /** The input is not a tool-call object; `scan` returned the index of the offending character. */
  | "failed";

const enum State {
  BeforeObject,
  KeyOrEnd,
  Key,
  InKey,
  Colon,
  Value,
  InName,
  InArgsString,
  InValue,
  AfterValue,
  Done,
  Failed,
}

const enum Role {
  Name,
  Args,
  Skip,
}

function isWs(c: number): boolean {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
}

function isHex(c: number): boolean {
  return (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x46) || (c >= 0x61 && c <= 0x66);
}

const SIMPLE_ESCAPES: Record<string, string> = {
  '"': '"',
  "\\": "\\",
  "/": "/",
  b: "\b",
  f: "\f",
  n: "\n",
  r: "\r",
  t: "\t",
};

export class ToolCallScanner {
  /** The function name, once its JSON string has closed. */
  name: string | undefined = undefined;
  /** True once an `arguments` value has started. */
  argsStarted = false;
  /** True once the `arguments` value is complete. */
  argsComplete = false;

  #state = State.BeforeObject;
  #role = Role.Skip;
  #raw = ""; // raw text of the key or name string being read
  #escape = false;
  #args = ""; // arguments text produced since the last `takeArgs`
  // Generic value scanning (raw arguments and skipped values).
  #closers: number[] = [];
  #inString = false;
  #primitive = false;
  // Decoding of a string-valued `arguments`.
  #pendingEscape = ""; // "\\", "\\u", "\\u12", … while incomplete
  #pendingHigh = ""; // an unpaired high surrogate held for its low half

  get status(): ToolCallScanStatus {
    return this.#state === State.Failed ? "failed" : this.#state === State.Done ? "done" : "scanning";
  }

  /** Arguments text produced since the previous call. */
  takeArgs(): string {
    const a = this.#args;
    this.#args = "";
    return a;
  }

  /**
   * Scans `text` from `from`. Returns where it stopped: `text.length` when all was consumed; the index just after
   * the name's closing quote when the name became known; the offending index on failure; in `done`, the index of the
   * first non-whitespace character after the object (trailing text that is not part of the call).
   */
  scan(text: string, from: number): number {
    const n = text.length;
    let i = from;
    // Start of the raw-arguments run inside `text` (-1 when not inside a raw arguments value).
    let run = this.#state === State.InValue && this.#role === Role.Args ? i : -1;
    let strRun = this.#state === State.InArgsString ? i : -1;
    while (i < n) {
      const c = text.charCodeAt(i);
      switch (this.#state) {
        case State.BeforeObject:
          if (isWs(c)) break;
          if (c !== 0x7b) return this.#failIn(text, i, run, strRun);
          this.#state = State.KeyOrEnd;
          break;
        case State.KeyOrEnd:
        case State.Key:
          if (isWs(c)) break;
          if (c === 0x7d && this.#state === State.KeyOrEnd) {
            this.#state = State.Done;
            break;
          }
          if (c !== 0x22) return this.#failIn(text, i, run, strRun);
          this.#state = State.InKey;
          this.#raw = "";
          this.#escape = false;
          break;
        case State.InKey:
        case State.InName: {
          if (this.#escape) this.#escape = false;
          else if (c === 0x5c) this.#escape = true;
          else if (c === 0x22) {
            const value = this.#decodeRaw();
            if (value === undefined) return this.#failIn(text, i, run, strRun);
            if (this.#state === State.InKey) {
              this.#role = value === "name"
                ? Role.Name
                : value === "arguments" || value === "parameters"
                ? Role.Args
                : Role.Skip;
              this.#state = State.Colon;
              break;
            }
            this.#state = State.AfterValue;
            if (this.name === undefined) {
              this.name = value;
              return i + 1;
            }
            break;
          }
          this.#raw += text[i];
          break;
        }
        case State.Colon:
          if (isWs(c)) break;
          if (c !== 0x3a) return this.#failIn(text, i, run, strRun);
          this.#state = State.Value;
          break;
        case State.Value:
          if (isWs(c)) break;
          if (this.#role === Role.Name) {
            if (c !== 0x22) return this.#failIn(text, i, run, strRun);
            this.#state = State.InName;
            this.#raw = "";
            this.#escape = false;
            break;
          }
          if (this.#role === Role.Args) {
            this.argsStarted = true;
            if (c === 0x22) {
              this.#state = State.InArgsString;
              strRun = i + 1;
              break;
            }
            run = i;
          }
          if (!this.#startValue(c)) return this.#failIn(text, i, run, strRun);
          if (this.#primitive && !this.#isPrimitiveChar(c)) return this.#failIn(text, i, run, strRun);
          this.#state = State.InValue;
          // A container or string may close on its first character only for strings handled below.
          break;
        case State.InArgsString: {
          const stop = this.#argsStringChar(text, i, strRun);
          if (stop === -2) return this.#failIn(text, i, run, strRun);
          if (stop === -1) {
            // String closed: flush the run up to the quote.
            strRun = -1;
            this.argsComplete = true;
            this.#state = State.AfterValue;
            break;
          }
          strRun = stop;
          break;
        }
        case State.InValue: {
          const ended = this.#valueChar(c);
          if (ended === -2) return this.#failIn(text, i, run, strRun);
          if (ended === 0) break;
          // ended === 1: the value ended on this character; ended === -1: a primitive ended before it.
          if (this.#role === Role.Args) {
            this.#args += text.slice(run, ended === 1 ? i + 1 : i);
            run = -1;
            this.argsComplete = true;
          }
          this.#state = State.AfterValue;
          if (ended === -1) continue; // reprocess this character as what follows the value
          break;
        }
        case State.AfterValue:
          if (isWs(c)) break;
          if (c === 0x2c) this.#state = State.Key;
          else if (c === 0x7d) this.#state = State.Done;
          else return this.#failIn(text, i, run, strRun);
          break;
        case State.Done:
          if (isWs(c)) break;
          return i;
        case State.Failed:
          return i;
        default: {
          const never: never = this.#state;
          return never;
        }
      }
      i++;
    }
    if (run >= 0 && this.#state === State.InValue) this.#args += text.slice(run, n);
    if (strRun >= 0 && this.#state === State.InArgsString && strRun < n) this.#args += text.slice(strRun, n);
    return n;
  }

  #fail(i: number): number {
    this.#state = State.Failed;
    return i;
  }

  /**
   * Fails at `i`, first moving every arguments character before `i` into the output, so that what was streamed
   * plus the text from `i` on is the whole input whatever the chunking.
   */
  #failIn(text: string, i: number, run: number, strRun: number): number {
    if (this.#state === State.InValue && this.#role === Role.Args && run >= 0) this.#args += text.slice(run, i);
    if (this.#state === State.InArgsString) {
      if (strRun >= 0 && strRun < i && this.#pendingEscape.length === 0) this.#args += text.slice(strRun, i);
      // A broken escape: its consumed characters (all but the offending one) are kept raw.
      this.#args += this.#pendingHigh + this.#pendingEscape.slice(0, -1);
      this.#pendingHigh = "";
      this.#pendingEscape = "";
    }
    return this.#fail(i);
  }

  #decodeRaw(): string | undefined {
    try {
      const v: unknown = JSON.parse(`"${this.#raw}"`);
      return typeof v === "string" ? v : undefined;
    } catch {
      return undefined;
    }
  }

  #startValue(c: number): boolean {
    this.#closers.length = 0;
    this.#inString = false;
    this.#escape = false;
    this.#primitive = false;
    if (c === 0x7b) this.#closers.push(0x7d);
    else if (c === 0x5b) this.#closers.push(0x5d);
    else if (c === 0x22) this.#inString = true;
    else this.#primitive = true;
    return true;
  }

  #isPrimitiveChar(c: number): boolean {
    // Letters, digits, sign, dot, exponent: enough to delimit `true`, `-1.5e3`, `null`.
    return (c >= 0x30 && c <= 0x39) || (c >= 0x61 && c <= 0x7a) || (c >= 0x41 && c <= 0x5a) || c === 0x2d ||
      c === 0x2b || c === 0x2e;
  }

  /** 0: continue; 1: value ended with this char; -1: primitive ended before this char; -2: malformed. */
  #valueChar(c: number): number {
    if (this.#primitive) {
      if (this.#isPrimitiveChar(c)) return 0;
      return -1;
    }
    if (this.#inString) {
      if (this.#escape) this.#escape = false;
      else if (c === 0x5c) this.#escape = true;
      else if (c === 0x22) {
        this.#inString = false;
        if (this.#closers.length === 0) return 1;
      }
      return 0;
    }
    if (c === 0x22) this.#inString = true;
    else if (c === 0x7b) this.#closers.push(0x7d);
    else if (c === 0x5b) this.#closers.push(0x5d);
    else if (c === 0x7d || c === 0x5d) {
      if (this.#closers.pop() !== c) return -2;
      if (this.#closers.length === 0) return 1;
    }
    return 0;
  }

  /**
   * One character of a string-valued `arguments`. `run` is where the current plain run began in `text`.
   * Returns the new run start, -1 when the string closed (run flushed), -2 on a malformed escape.
   */
  #argsStringChar(text: string, i: number, run: number): number {
    const c = text.charCodeAt(i);
    if (this.#pendingEscape.length > 0) {
      this.#pendingEscape += text[i];
      const e = this.#pendingEscape;
      if (e.length === 2) {
        if (e[1] === "u") return i + 1;
        const simple = SIMPLE_ESCAPES[e[1]!];
        if (simple === undefined) return -2;
        this.#pendingEscape = "";
        this.#emitDecoded(simple);
        return i + 1;
      }
      if (!isHex(c)) return -2;
      if (e.length < 6) return i + 1;
      this.#pendingEscape = "";
      this.#emitDecoded(String.fromCharCode(parseInt(e.slice(2), 16)));
      return i + 1;
    }
    if (c === 0x5c || c === 0x22) {
      if (run >= 0 && run < i) this.#emitDecoded(text.slice(run, i));
      if (c === 0x22) {
        // An unpaired high surrogate at the end of the string is kept as is.
        this.#args += this.#pendingHigh;
        this.#pendingHigh = "";
        return -1;
      }
      this.#pendingEscape = "\\";
      return i + 1;
    }
    if (this.#pendingHigh.length > 0) {
      this.#args += this.#pendingHigh;
      this.#pendingHigh = "";
    }
    return run;
  }

  /** Appends decoded text, holding a trailing high surrogate until its pair arrives. */
  #emitDecoded(s: string): void {
    let t = this.#pendingHigh + s;
    this.#pendingHigh = "";
    const last = t.charCodeAt(t.length - 1);
    if (last >= 0xd800 && last <= 0xdbff) {
      this.#pendingHigh = t.slice(-1);
      t = t.slice(0, -1);
    }
    this.#args += t;
  }
}
