import type { Tokenizer } from "./tokenizer.ts";

/**
 * A Hugging Face `tokenizer.json` BPE tokenizer, written for rill (no tokenizer package).
 *
 * Supported: `model.type = "BPE"` with merges as `"a b"` strings or `[a, b]` pairs, `ignore_merges`, `byte_fallback`,
 * `unk_token`/`fuse_unk`; normalizers Sequence/Prepend/Replace/NFC/NFD/NFKC/NFKD/Lowercase; pre-tokenizers
 * Sequence/ByteLevel/Split/Metaspace/Digits; added tokens with `lstrip`/`rstrip`. `encode` adds no special tokens:
 * chat templates put BOS in the text themselves, as HF's `apply_chat_template` does. The post-processor
 * (TemplateProcessing, BertProcessing, RobertaProcessing, ByteLevel, Sequence) gives the specials that
 * `withSpecialTokens` puts around a single sequence, as HF's `add_special_tokens=True` does (Llama 3's BOS).
 *
 * Two byte conventions: byte-level (GPT-2 byte-to-unicode alphabet, chosen when a ByteLevel pre-tokenizer or decoder
 * is present) and SentencePiece-style (`▁` stands for a space, `<0xNN>` tokens for raw bytes).
 */
export class HfTokenizerError extends Error {
  override name = "HfTokenizerError";
}

/** GPT-2's reversible byte → printable-character table: printable Latin-1 bytes map to themselves. */
function byteToUnicodeTable(): string[] {
  const table: string[] = new Array(256);
  let extra = 0;
  for (let b = 0; b < 256; b++) {
    const printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
    table[b] = String.fromCharCode(printable ? b : 256 + extra++);
  }
  return table;
}

const BYTE_TO_CHAR = byteToUnicodeTable();
const CHAR_TO_BYTE = new Map<string, number>(BYTE_TO_CHAR.map((c, b) => [c, b]));

/** GPT-2's pre-tokenization regex (what `ByteLevel { use_regex: true }` splits with). */
const GPT2_SPLIT = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

const utf8 = new TextEncoder();

/** A text → pieces stage. `isFirst` is true for the chunk at offset 0 of the whole text (Metaspace "first"). */
type PreTokenizeStep = (pieces: string[], isFirst: boolean) => string[];
type NormalizeStep = (text: string) => string;

interface AddedToken {
  readonly id: number;
  readonly content: string;
  readonly special: boolean;
  readonly lstrip: boolean;
  readonly rstrip: boolean;
}

type SplitBehavior = "Isolated" | "Removed" | "MergedWithPrevious" | "MergedWithNext" | "Contiguous";

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\\/]/g, "\\$&");
}

function compileRegex(pattern: string, where: string): RegExp {
  try {
    return new RegExp(pattern, "gu");
  } catch (e) {
    throw new HfTokenizerError(`${where}: regex ${JSON.stringify(pattern)} is not supported: ${(e as Error).message}`);
  }
}

/** The pattern of a Split/Replace: `{String: "..."}` (literal) or `{Regex: "..."}`. */
function patternRegex(pattern: unknown, where: string): RegExp {
  if (isRecord(pattern)) {
    if (typeof pattern.String === "string") return new RegExp(escapeRegExp(pattern.String), "gu");
    if (typeof pattern.Regex === "string") return compileRegex(pattern.Regex, where);
  }
  throw new HfTokenizerError(`${where}: "pattern" must be {"String": ...} or {"Regex": ...}`);
}

/** Splits `text` by `regex` following HF's SplitDelimiterBehavior. `invert` makes the matches the kept parts. */
function splitBy(text: string, regex: RegExp, behavior: SplitBehavior, invert: boolean): string[] {
  const spans: { text: string; delim: boolean }[] = [];
  let last = 0;
  regex.lastIndex = 0;
  for (const m of text.matchAll(regex)) {
    if (m[0].length === 0) continue;
    if (m.index > last) spans.push({ text: text.slice(last, m.index), delim: invert });
    spans.push({ text: m[0], delim: !invert });
    last = m.index + m[0].length;
  }
  if (last < text.length) spans.push({ text: text.slice(last), delim: invert });
  const out: string[] = [];
  switch (behavior) {
    case "Isolated":
      for (const s of spans) out.push(s.text);
      return out;
    case "Removed":
      for (const s of spans) if (!s.delim) out.push(s.text);
      return out;
    case "MergedWithPrevious": {
      let prevWasDelim = true;
      for (const s of spans) {
        if (s.delim && out.length > 0 && !prevWasDelim) out[out.length - 1] += s.text;
        else out.push(s.text);
        prevWasDelim = s.delim;
      }
      return out;
    }
    case "MergedWithNext": {
      let pending = "";
      for (const s of spans) {
        if (s.delim) {
          if (pending !== "") out.push(pending);
          pending = s.text;
        } else {
          out.push(pending + s.text);
          pending = "";
        }
      }
      if (pending !== "") out.push(pending);
      return out;
    }
    case "Contiguous": {
      let prevDelim = false;
      for (const s of spans) {
        if (s.delim && prevDelim && out.length > 0) out[out.length - 1] += s.text;
        else out.push(s.text);
        prevDelim = s.delim;
      }
      return out;
    }
    default: {
      const never: never = behavior;
      throw new HfTokenizerError(`unknown split behavior ${String(never)}`);
    }
  }
}

function toBytesString(piece: string): string {
  let out = "";
  for (const b of utf8.encode(piece)) out += BYTE_TO_CHAR[b];
  return out;
}

function parseNormalizer(cfg: unknown, where: string): NormalizeStep[] {
  if (cfg === null || cfg === undefined) return [];
  if (!isRecord(cfg) || typeof cfg.type !== "string") {
    throw new HfTokenizerError(`${where}: must be an object with "type"`);
  }
  switch (cfg.type) {
    case "Sequence": {
      if (!Array.isArray(cfg.normalizers)) throw new HfTokenizerError(`${where}: "normalizers" must be an array`);
      return cfg.normalizers.flatMap((n, i) => parseNormalizer(n, `${where}.normalizers[${i}]`));
    }
    case "Prepend": {
      const prepend = cfg.prepend;
      if (typeof prepend !== "string") throw new HfTokenizerError(`${where}: "prepend" must be a string`);
      return [(t) => (t === "" ? t : prepend + t)];
    }
    case "Replace": {
      const re = patternRegex(cfg.pattern, where);
      const content = cfg.content;
      if (typeof content !== "string") throw new HfTokenizerError(`${where}: "content" must be a string`);
      return [(t) => t.replace(re, () => content)];
    }
    case "NFC":
    case "NFD":
    case "NFKC":
    case "NFKD": {
      const form = cfg.type;
      return [(t) => t.normalize(form)];
    }
    case "Lowercase":
      return [(t) => t.toLowerCase()];
    default:
      throw new HfTokenizerError(`${where}: normalizer type ${JSON.stringify(cfg.type)} is not supported`);
  }
}

interface PreTokenizerInfo {
  steps: PreTokenizeStep[];
  byteLevel: boolean;
  metaspace: string | undefined;
}

function parsePreTokenizer(cfg: unknown, where: string, info: PreTokenizerInfo): void {
  if (cfg === null || cfg === undefined) return;
  if (!isRecord(cfg) || typeof cfg.type !== "string") {
    throw new HfTokenizerError(`${where}: must be an object with "type"`);
  }
  switch (cfg.type) {
    case "Sequence": {
      if (!Array.isArray(cfg.pretokenizers)) throw new HfTokenizerError(`${where}: "pretokenizers" must be an array`);
      cfg.pretokenizers.forEach((p, i) => parsePreTokenizer(p, `${where}.pretokenizers[${i}]`, info));
      return;
    }
    case "ByteLevel": {
      info.byteLevel = true;
      const addPrefixSpace = cfg.add_prefix_space === true;
      // HF defaults use_regex to true when the field is absent (older files).
      const regex = cfg.use_regex === false ? undefined : compileRegex(GPT2_SPLIT, where);
      info.steps.push((pieces) => {
        const out: string[] = [];
        for (let p of pieces) {
          if (addPrefixSpace && !p.startsWith(" ")) p = " " + p;
          const parts = regex === undefined ? [p] : splitBy(p, regex, "Isolated", false);
          for (const part of parts) out.push(toBytesString(part));
        }
        return out;
      });
      return;
    }
    case "Split": {
      const re = patternRegex(cfg.pattern, where);
      const behavior = cfg.behavior ?? "Isolated";
      const known = ["Isolated", "Removed", "MergedWithPrevious", "MergedWithNext", "Contiguous"];
      if (typeof behavior !== "string" || !known.includes(behavior)) {
        throw new HfTokenizerError(`${where}: "behavior" ${JSON.stringify(behavior)} is not supported`);
      }
      const invert = cfg.invert === true;
      info.steps.push((pieces) => pieces.flatMap((p) => splitBy(p, re, behavior as SplitBehavior, invert)));
      return;
    }
    case "Metaspace": {
      const replacement = typeof cfg.replacement === "string" ? cfg.replacement : "\u2581";
      info.metaspace = replacement;
      // Newer files say prepend_scheme; older ones add_prefix_space (true meant "always").
      const scheme = typeof cfg.prepend_scheme === "string"
        ? cfg.prepend_scheme
        : cfg.add_prefix_space === false
        ? "never"
        : "always";
      if (scheme !== "always" && scheme !== "first" && scheme !== "never") {
        throw new HfTokenizerError(`${where}: "prepend_scheme" ${JSON.stringify(scheme)} is not supported`);
      }
      const split = cfg.split !== false;
      const splitRe = new RegExp(escapeRegExp(replacement), "gu");
      info.steps.push((pieces, isFirst) => {
        const out: string[] = [];
        pieces.forEach((p, i) => {
          let s = p.replaceAll(" ", replacement);
          const prepend = scheme === "always" || (scheme === "first" && isFirst && i === 0);
          if (prepend && !s.startsWith(replacement)) s = replacement + s;
          if (split) out.push(...splitBy(s, splitRe, "MergedWithNext", false));
          else out.push(s);
        });
        return out;
      });
      return;
    }
    case "Digits": {
      const re = cfg.individual_digits === true ? /\p{N}/gu : /\p{N}+/gu;
      info.steps.push((pieces) => pieces.flatMap((p) => splitBy(p, re, "Isolated", false)));
      return;
    }
    default:
      throw new HfTokenizerError(`${where}: pre-tokenizer type ${JSON.stringify(cfg.type)} is not supported`);
  }
}

/** The special-token ids a post-processor puts before and after a single sequence. */
interface SpecialsAround {
  readonly prefix: readonly number[];
  readonly suffix: readonly number[];
}

const NO_SPECIALS: SpecialsAround = { prefix: [], suffix: [] };

/** `[text, id]`, the form BertProcessing and RobertaProcessing give `cls` and `sep` in. */
function pairId(v: unknown, where: string): number {
  if (Array.isArray(v) && v.length === 2 && typeof v[1] === "number" && Number.isInteger(v[1]) && v[1] >= 0) {
    return v[1];
  }
  throw new HfTokenizerError(`${where}: must be ["token", id]`);
}

/** The ids of a TemplateProcessing special token: its `special_tokens` entry, else the token of that text. */
function templateSpecialIds(
  cfg: Record<string, unknown>,
  name: string,
  where: string,
  lookup: (text: string) => number | undefined,
): number[] {
  const entry = isRecord(cfg.special_tokens) ? cfg.special_tokens[name] : undefined;
  if (isRecord(entry) && Array.isArray(entry.ids) && entry.ids.every((id) => Number.isInteger(id) && id >= 0)) {
    return entry.ids as number[];
  }
  const id = lookup(name);
  if (id === undefined) throw new HfTokenizerError(`${where}: special token ${JSON.stringify(name)} is unknown`);
  return [id];
}

function parsePostProcessor(
  cfg: unknown,
  where: string,
  lookup: (text: string) => number | undefined,
): SpecialsAround {
  if (cfg === null || cfg === undefined) return NO_SPECIALS;
  if (!isRecord(cfg) || typeof cfg.type !== "string") {
    throw new HfTokenizerError(`${where}: must be an object with "type"`);
  }
  switch (cfg.type) {
    case "ByteLevel":
      return NO_SPECIALS;
    case "Sequence": {
      if (!Array.isArray(cfg.processors)) throw new HfTokenizerError(`${where}: "processors" must be an array`);
      const parts = cfg.processors.map((p, i) => parsePostProcessor(p, `${where}.processors[${i}]`, lookup));
      return { prefix: parts.flatMap((p) => p.prefix), suffix: parts.flatMap((p) => p.suffix) };
    }
    case "BertProcessing":
    case "RobertaProcessing":
      return { prefix: [pairId(cfg.cls, `${where}.cls`)], suffix: [pairId(cfg.sep, `${where}.sep`)] };
    case "TemplateProcessing": {
      if (!Array.isArray(cfg.single)) throw new HfTokenizerError(`${where}: "single" must be an array`);
      const prefix: number[] = [];
      const suffix: number[] = [];
      let seenSequence = false;
      cfg.single.forEach((piece, i) => {
        const at = `${where}.single[${i}]`;
        if (isRecord(piece) && isRecord(piece.Sequence)) {
          seenSequence = true;
        } else if (isRecord(piece) && isRecord(piece.SpecialToken) && typeof piece.SpecialToken.id === "string") {
          (seenSequence ? suffix : prefix).push(...templateSpecialIds(cfg, piece.SpecialToken.id, at, lookup));
        } else {
          throw new HfTokenizerError(`${at}: must be {"SpecialToken": {"id": ...}} or {"Sequence": {"id": ...}}`);
        }
      });
      return { prefix, suffix };
    }
    default:
      throw new HfTokenizerError(`${where}: post-processor type ${JSON.stringify(cfg.type)} is not supported`);
  }
}

/** True when the decoder (possibly inside a Sequence) contains a step of this type. */
function decoderHas(cfg: unknown, type: string): boolean {
  if (!isRecord(cfg)) return false;
  if (cfg.type === type) return true;
  if (cfg.type === "Sequence" && Array.isArray(cfg.decoders)) return cfg.decoders.some((d) => decoderHas(d, type));
  return false;
}

/** How many leading spaces the decoder strips from a whole decoded text (SentencePiece's prepended `▁`). */
function decoderLeadingStrip(cfg: unknown): number {
  if (!isRecord(cfg)) return 0;
  if (cfg.type === "Strip" && cfg.content === " " && typeof cfg.start === "number") return cfg.start;
  if (cfg.type === "Metaspace") {
    const scheme = typeof cfg.prepend_scheme === "string"
      ? cfg.prepend_scheme
      : cfg.add_prefix_space === false
      ? "never"
      : "always";
    return scheme === "never" ? 0 : 1;
  }
  if (cfg.type === "Sequence" && Array.isArray(cfg.decoders)) {
    return cfg.decoders.reduce((n: number, d) => n + decoderLeadingStrip(d), 0);
  }
  return 0;
}

/** A min-heap of plain numbers (BPE candidates packed as rank * 2^25 + position). */
class NumberHeap {
  #a: number[] = [];
  get size(): number {
    return this.#a.length;
  }
  push(v: number): void {
    const a = this.#a;
    let i = a.length;
    a.push(v);
    while (i > 0) {
      const parent = (i - 1) >> 1;
      const pv = a[parent]!;
      if (pv <= v) break;
      a[i] = pv;
      i = parent;
    }
    a[i] = v;
  }
  pop(): number {
    const a = this.#a;
    const top = a[0]!;
    const last = a.pop()!;
    if (a.length > 0) {
      let i = 0;
      const n = a.length;
      for (;;) {
        const l = 2 * i + 1;
        if (l >= n) break;
        const r = l + 1;
        const c = r < n && a[r]! < a[l]! ? r : l;
        if (a[c]! >= last) break;
        a[i] = a[c]!;
        i = c;
      }
      a[i] = last;
    }
    return top;
  }
}

const POS_SPACE = 2 ** 25;
const CACHE_LIMIT = 100_000;

export class HfTokenizer implements Tokenizer {
  readonly vocabSize: number;
  /** "byte-level" (GPT-2 alphabet) or "sentencepiece" (`▁` + `<0xNN>`). */
  readonly style: "byte-level" | "sentencepiece";

  readonly #vocab: Map<string, number>;
  readonly #idToToken: (string | undefined)[];
  /**
   * Merges by left id, then right id → merge rank (lower merges first); `#mergeId[rank]` is the merged token. Small
   * integer keys keep Map lookups on V8's fast path (a packed left*V+right key would be a heap number).
   */
  readonly #mergeByLeft: (Map<number, number> | undefined)[];
  readonly #mergeId: Int32Array;
  readonly #mergeCount: number;
  readonly #added: AddedToken[];
  readonly #addedByText = new Map<string, AddedToken>();
  readonly #addedById = new Map<number, AddedToken>();
  readonly #addedRegex: RegExp | undefined;
  readonly #normalize: NormalizeStep[];
  readonly #preTokenize: PreTokenizeStep[];
  readonly #ignoreMerges: boolean;
  readonly #byteFallback: boolean;
  readonly #byteTokenIds: (number | undefined)[] = new Array(256);
  readonly #unkId: number | undefined;
  readonly #fuseUnk: boolean;
  readonly #metaspace: string;
  readonly #leadingStrip: number;
  readonly #specialsAround: SpecialsAround;
  readonly #cache = new Map<string, number[]>();
  readonly #bytes: (Uint8Array | undefined)[] = [];

  private constructor(json: Record<string, unknown>) {
    const model = json.model;
    if (!isRecord(model)) throw new HfTokenizerError(`"model" must be an object`);
    // Files written by older `tokenizers` versions omit model.type; BPE is then recognised by its merges.
    const type = model.type ?? (Array.isArray(model.merges) ? "BPE" : undefined);
    if (type !== "BPE") {
      throw new HfTokenizerError(`"model.type" ${JSON.stringify(model.type)} is not supported (BPE only)`);
    }
    if (!isRecord(model.vocab)) throw new HfTokenizerError(`"model.vocab" must be an object of token → id`);
    for (const field of ["continuing_subword_prefix", "end_of_word_suffix"]) {
      const v = model[field];
      if (typeof v === "string" && v !== "") throw new HfTokenizerError(`"model.${field}" is not supported`);
    }

    this.#vocab = new Map();
    let maxId = -1;
    for (const [tok, id] of Object.entries(model.vocab)) {
      if (typeof id !== "number" || !Number.isInteger(id) || id < 0) {
        throw new HfTokenizerError(`"model.vocab": id of ${JSON.stringify(tok)} must be a non-negative integer`);
      }
      this.#vocab.set(tok, id);
      if (id > maxId) maxId = id;
    }

    const addedJson = json.added_tokens ?? [];
    if (!Array.isArray(addedJson)) throw new HfTokenizerError(`"added_tokens" must be an array`);
    this.#added = addedJson.map((t, i) => {
      if (!isRecord(t) || typeof t.content !== "string" || t.content === "" || typeof t.id !== "number" || t.id < 0) {
        throw new HfTokenizerError(`"added_tokens[${i}]" must have a non-empty "content" and a non-negative "id"`);
      }
      return {
        id: t.id,
        content: t.content,
        special: t.special === true,
        lstrip: t.lstrip === true,
        rstrip: t.rstrip === true,
      };
    });
    for (const t of this.#added) {
      this.#addedByText.set(t.content, t);
      this.#addedById.set(t.id, t);
      if (t.id > maxId) maxId = t.id;
    }
    this.vocabSize = maxId + 1;
    this.#idToToken = new Array(this.vocabSize);
    for (const [tok, id] of this.#vocab) this.#idToToken[id] = tok;
    for (const t of this.#added) this.#idToToken[t.id] = t.content;
    if (this.#added.length > 0) {
      // Longest first so `<|im_start|>` wins over a shorter token that is its prefix.
      const alternatives = [...this.#addedByText.keys()].sort((a, b) => b.length - a.length).map(escapeRegExp);
      this.#addedRegex = new RegExp(alternatives.join("|"), "gu");
    }

    const merges = model.merges ?? [];
    if (!Array.isArray(merges)) throw new HfTokenizerError(`"model.merges" must be an array`);
    const vocab = this.#vocab;
    const byLeft: (Map<number, number> | undefined)[] = new Array(this.vocabSize);
    const mergeId = new Int32Array(merges.length);
    for (let rank = 0; rank < merges.length; rank++) {
      const m: unknown = merges[rank];
      let a: unknown, b: unknown;
      if (typeof m === "string") {
        const sp = m.indexOf(" ", 1);
        if (sp < 0) throw new HfTokenizerError(`"model.merges[${rank}]" ${JSON.stringify(m)} must be "a b"`);
        a = m.slice(0, sp);
        b = m.slice(sp + 1);
      } else if (Array.isArray(m) && m.length === 2) {
        [a, b] = m;
      }
      if (typeof a !== "string" || typeof b !== "string") {
        throw new HfTokenizerError(`"model.merges[${rank}]" must be "a b" or ["a", "b"]`);
      }
      const ia = vocab.get(a), ib = vocab.get(b), ic = vocab.get(a + b);
      if (ia === undefined || ib === undefined || ic === undefined) {
        throw new HfTokenizerError(
          `"model.merges[${rank}]" ${JSON.stringify(`${a} ${b}`)} uses a token missing from "model.vocab"`,
        );
      }
      mergeId[rank] = ic;
      let right = byLeft[ia];
      if (right === undefined) byLeft[ia] = right = new Map();
      // A duplicated merge keeps its first (best) rank, as HF does.
      if (!right.has(ib)) right.set(ib, rank);
    }
    this.#mergeByLeft = byLeft;
    this.#mergeId = mergeId;
    this.#mergeCount = merges.length;

    this.#ignoreMerges = model.ignore_merges === true;
    this.#byteFallback = model.byte_fallback === true;
    this.#fuseUnk = model.fuse_unk === true;
    this.#unkId = typeof model.unk_token === "string" ? this.#vocab.get(model.unk_token) : undefined;
    for (let b = 0; b < 256; b++) {
      this.#byteTokenIds[b] = this.#vocab.get(`<0x${b.toString(16).toUpperCase().padStart(2, "0")}>`);
    }

    this.#normalize = parseNormalizer(json.normalizer, `"normalizer"`);
    const info: PreTokenizerInfo = { steps: [], byteLevel: false, metaspace: undefined };
    parsePreTokenizer(json.pre_tokenizer, `"pre_tokenizer"`, info);
    this.#preTokenize = info.steps;
    const byteLevel = info.byteLevel || decoderHas(json.decoder, "ByteLevel");
    this.style = byteLevel ? "byte-level" : "sentencepiece";
    this.#metaspace = info.metaspace ?? "\u2581";
    this.#leadingStrip = byteLevel ? 0 : decoderLeadingStrip(json.decoder);
    this.#specialsAround = parsePostProcessor(json.post_processor, `"post_processor"`, (t) => this.tokenToId(t));
  }

  /** Builds a tokenizer from a parsed `tokenizer.json`; throws HfTokenizerError naming the offending field. */
  static fromJSON(json: unknown): HfTokenizer {
    if (!isRecord(json)) throw new HfTokenizerError("tokenizer.json must be a JSON object");
    return new HfTokenizer(json);
  }

  static async fromFile(path: string): Promise<HfTokenizer> {
    return HfTokenizer.fromJSON(JSON.parse(await Deno.readTextFile(path)));
  }

  encode(text: string): number[] {
    const re = this.#addedRegex;
    if (re === undefined) return this.encodeOrdinary(text);
    const out: number[] = [];
    let last = 0;
    let stripNextLeading = false;
    re.lastIndex = 0;
    for (const m of text.matchAll(re)) {
      const tok = this.#addedByText.get(m[0])!;
      let chunk = text.slice(last, m.index);
      if (stripNextLeading) chunk = chunk.trimStart();
      if (tok.lstrip) chunk = chunk.trimEnd();
      this.#encodeChunk(chunk, last === 0, out);
      out.push(tok.id);
      last = m.index + m[0].length;
      stripNextLeading = tok.rstrip;
    }
    let tail = text.slice(last);
    if (stripNextLeading) tail = tail.trimStart();
    this.#encodeChunk(tail, last === 0, out);
    return out;
  }

  /** `ids` of one sequence with the post-processor's special tokens around them (HF's `add_special_tokens`). */
  withSpecialTokens(ids: readonly number[]): number[] {
    return [...this.#specialsAround.prefix, ...ids, ...this.#specialsAround.suffix];
  }

  encodeOrdinary(text: string): number[] {
    const out: number[] = [];
    this.#encodeChunk(text, true, out);
    return out;
  }

  decode(ids: readonly number[]): string {
    const parts: Uint8Array[] = [];
    let total = 0;
    for (const id of ids) {
      const b = this.tokenBytes(id);
      parts.push(b);
      total += b.length;
    }
    const all = new Uint8Array(total);
    let off = 0;
    for (const p of parts) {
      all.set(p, off);
      off += p.length;
    }
    let text = new TextDecoder().decode(all);
    for (let i = 0; i < this.#leadingStrip && text.startsWith(" "); i++) text = text.slice(1);
    return text;
  }

  tokenBytes(id: number): Uint8Array {
    const cached = this.#bytes[id];
    if (cached !== undefined) return cached;
    const bytes = this.#computeBytes(id);
    if (Number.isInteger(id) && id >= 0 && id < this.vocabSize) this.#bytes[id] = bytes;
    return bytes;
  }

  specialId(text: string): number | undefined {
    return this.#addedByText.get(text)?.id;
  }

  isSpecial(id: number): boolean {
    return this.#addedById.get(id)?.special === true;
  }

  /** The vocabulary string of an id (byte-level alphabet or `▁` form), or undefined for unused ids. */
  idToToken(id: number): string | undefined {
    return this.#idToToken[id];
  }

  /** The id of a vocabulary or added token by its vocabulary string. */
  tokenToId(token: string): number | undefined {
    return this.#addedByText.get(token)?.id ?? this.#vocab.get(token);
  }

  /** All added tokens (specials and non-special added tokens such as Qwen's `<think>`). */
  get addedTokens(): readonly { readonly id: number; readonly content: string; readonly special: boolean }[] {
    return this.#added;
  }

  #computeBytes(id: number): Uint8Array {
    const added = this.#addedById.get(id);
    if (added !== undefined) return utf8.encode(added.content);
    const tok = this.#idToToken[id];
    // Ids past the tokenizer (padded embedding rows) stand for nothing.
    if (tok === undefined) return new Uint8Array(0);
    if (this.style === "byte-level") {
      const out: number[] = [];
      for (const ch of tok) {
        const b = CHAR_TO_BYTE.get(ch);
        if (b !== undefined) out.push(b);
        else out.push(...utf8.encode(ch));
      }
      return Uint8Array.from(out);
    }
    if (this.#byteFallback && tok.length === 6 && /^<0x[0-9A-Fa-f]{2}>$/.test(tok)) {
      return Uint8Array.of(parseInt(tok.slice(3, 5), 16));
    }
    return utf8.encode(tok.replaceAll(this.#metaspace, " "));
  }

  #encodeChunk(chunk: string, isFirst: boolean, out: number[]): void {
    if (chunk === "") return;
    let text = chunk;
    for (const n of this.#normalize) text = n(text);
    let pieces = [text];
    for (const step of this.#preTokenize) pieces = step(pieces, isFirst);
    for (const piece of pieces) {
      if (piece === "") continue;
      let ids = this.#cache.get(piece);
      if (ids === undefined) {
        ids = this.#bpe(piece);
        if (this.#cache.size >= CACHE_LIMIT) this.#cache.clear();
        this.#cache.set(piece, ids);
      }
      for (const id of ids) out.push(id);
    }
  }

  /** Byte-pair merges of one pre-token: always the lowest-rank adjacent pair first, leftmost on ties (as HF). */
  #bpe(word: string): number[] {
    if (this.#ignoreMerges) {
      const whole = this.#vocab.get(word);
      if (whole !== undefined) return [whole];
    }
    const ids: number[] = [];
    let lastWasUnk = false;
    for (const ch of word) {
      const id = this.#vocab.get(ch);
      if (id !== undefined) {
        ids.push(id);
        lastWasUnk = false;
        continue;
      }
      if (this.#byteFallback) {
        const bytes = utf8.encode(ch);
        const byteIds = Array.from(bytes, (b) => this.#byteTokenIds[b]);
        if (byteIds.every((b) => b !== undefined)) {
          ids.push(...(byteIds as number[]));
          lastWasUnk = false;
          continue;
        }
      }
      if (this.#unkId !== undefined && !(this.#fuseUnk && lastWasUnk)) ids.push(this.#unkId);
      // Without an unk token HF drops the character; rill does the same rather than fail mid-request.
      lastWasUnk = this.#unkId !== undefined;
    }
    const n = ids.length;
    if (n < 2 || this.#mergeCount === 0) return ids;
    if (n >= POS_SPACE) throw new HfTokenizerError(`pre-token of ${n} symbols is too long`);

    const next = new Int32Array(n);
    const prev = new Int32Array(n);
    for (let i = 0; i < n; i++) {
      next[i] = i + 1 < n ? i + 1 : -1;
      prev[i] = i - 1;
    }
    const heap = new NumberHeap();
    const byLeft = this.#mergeByLeft;
    const rankOf = (left: number, right: number) => byLeft[left]?.get(right);
    for (let i = 0; i + 1 < n; i++) {
      const r = rankOf(ids[i]!, ids[i + 1]!);
      if (r !== undefined) heap.push(r * POS_SPACE + i);
    }
    // A heap entry is stale when its pair changed since it was pushed; ranks are unique per pair, so comparing the
    // current pair's rank with the entry's rank detects that without storing the pair.
    while (heap.size > 0) {
      const entry = heap.pop();
      const pos = entry % POS_SPACE;
      const rank = (entry - pos) / POS_SPACE;
      const left = ids[pos]!;
      const j = next[pos]!;
      if (left < 0 || j < 0) continue;
      if (rankOf(left, ids[j]!) !== rank) continue;
      ids[pos] = this.#mergeId[rank]!;
      ids[j] = -1;
      const after = next[j]!;
      next[pos] = after;
      if (after >= 0) prev[after] = pos;
      const before = prev[pos]!;
      if (before >= 0) {
        const r = rankOf(ids[before]!, ids[pos]!);
        if (r !== undefined) heap.push(r * POS_SPACE + before);
      }
      if (after >= 0) {
        const r = rankOf(ids[pos]!, ids[after]!);
        if (r !== undefined) heap.push(r * POS_SPACE + pos);
      }
    }
    const out: number[] = [];
    for (let i = 0; i >= 0; i = next[i]!) out.push(ids[i]!);
    return out;
  }
}
