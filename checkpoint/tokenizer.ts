/**
 * What the rest of rill needs from a tokenizer. Implementations load a Hugging Face `tokenizer.json`
 * (byte-level BPE or SentencePiece-style) or wrap a fixed vocabulary in tests.
 */
export interface Tokenizer {
  readonly vocabSize: number;
  /** Encodes text; special-token text (e.g. `<|start|>`) inside it is encoded as the special token. */
  encode(text: string): number[];
  /**
   * One sequence's ids with the special tokens the tokenizer's post-processor adds around a text (Llama 3's BOS), as
   * HF's and vLLM's `add_special_tokens` does. Absent: the tokenizer adds none.
   */
  withSpecialTokens?(ids: readonly number[]): number[];
  /** Encodes text treating everything as plain text, never producing special tokens. */
  encodeOrdinary(text: string): number[];
  /** Decodes ids to text (specials included as their text). Not for streaming: use a per-stream detokenizer. */
  decode(ids: readonly number[]): string;
  /**
   * The raw bytes a token stands for (UTF-8 of a special token's text). Streaming detokenizers concatenate these
   * and decode incrementally, so a character split across tokens never yields U+FFFD.
   */
  tokenBytes(id: number): Uint8Array;
  /** The id of a special/added token by its exact text, or undefined. Parsers look specials up here, never hard-code ids. */
  specialId(text: string): number | undefined;
  /** True for special/added tokens that are control tokens (never shown as text). */
  isSpecial(id: number): boolean;
}
