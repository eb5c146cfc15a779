/**
 * rill's Hugging Face tokenizer as xgrammar's TokenizerInfo: the encoded vocabulary (vocabulary strings in the
 * tokenizer's own convention, added tokens as their text), its type (BYTE_LEVEL for the GPT-2 alphabet, BYTE_FALLBACK
 * for SentencePiece `▁` + `<0xNN>`), and the stop ids. Ids past the tokenizer (padded embedding rows) are empty strings,
 * which xgrammar never allows.
 */
import type { HfTokenizer } from "../checkpoint/hf_tokenizer.ts";
import { xgrammar, type XgTokenizerInfo } from "./xgrammar.ts";

export interface TokenizerVocab {
  readonly encoded: string[];
  readonly vocabType: "BYTE_LEVEL" | "BYTE_FALLBACK";
}

/** The vocabulary strings xgrammar decodes, `vocabSize` entries (the model's, which may exceed the tokenizer's). */
export function encodedVocab(tokenizer: HfTokenizer, vocabSize: number): TokenizerVocab {
  const added = new Map(tokenizer.addedTokens.map((t) => [t.id, t.content]));
  const encoded: string[] = [];
  for (let id = 0; id < vocabSize; id++) encoded.push(added.get(id) ?? tokenizer.idToToken(id) ?? "");
  return { encoded, vocabType: tokenizer.style === "byte-level" ? "BYTE_LEVEL" : "BYTE_FALLBACK" };
}

export function createTokenizerInfo(
  tokenizer: HfTokenizer,
  vocabSize: number,
  stopTokens: readonly number[],
): Promise<XgTokenizerInfo> {
  const { encoded, vocabType } = encodedVocab(tokenizer, vocabSize);
  return xgrammar().TokenizerInfo.createTokenizerInfo(encoded, vocabType, false, vocabSize, [...stopTokens]);
}
