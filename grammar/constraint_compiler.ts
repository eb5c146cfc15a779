/**
 * Compiles request constraints for one model (tokenizer + vocabulary size) and hands out per-sequence matchers.
 * Compiled grammars are cached by their structural tag, so repeated schemas (the common case: one app, one schema)
 * compile once.
 *
 * Compilation runs on the calling thread, synchronously inside WebAssembly: xgrammar's matchers must live in the
 * module instance that compiled their grammar, the web build cannot serialise a compiled grammar, and masks are
 * needed synchronously inside each engine step, so neither compiling in a Worker nor keeping matchers there fits.
 * The stall is bounded instead: compile time grows with the size of the schema's grammar (measured on the bundled
 * models: ~16k grammar characters ≈ 120 ms, ~330k ≈ 3 s), so a schema whose grammar exceeds MAX_GRAMMAR_CHARS is
 * refused with a 400 before it is compiled. Each schema compiles once per process (cache).
 */
import type { HfTokenizer } from "../checkpoint/hf_tokenizer.ts";
import { compactJsonGrammar } from "./compact_json_grammar.ts";
import { GrammarConstraint } from "./grammar_constraint.ts";
import {
  buildStructuralTag,
  type ConstraintLayout,
  type OutputConstraintSpec,
  type SchemaRef,
} from "./output_constraint.ts";
import { createTokenizerInfo } from "./tokenizer_info.ts";
import {
  GrammarError,
  initXgrammar,
  withXgrammarErrors,
  type XgCompiledGrammar,
  type XgCompiler,
  xgrammar,
} from "./xgrammar.ts";

const CACHE_LIMIT = 128;

/** Largest EBNF (all schemas of one request together) compiled on the event loop. */
export const MAX_GRAMMAR_CHARS = 32_000;

function checkSize(chars: number): void {
  if (chars > MAX_GRAMMAR_CHARS) {
    throw new GrammarError(
      `the schema is too large to compile without stalling other requests: its grammar has ${chars} characters, ` +
        `the limit is ${MAX_GRAMMAR_CHARS}`,
    );
  }
}

/** A compiled request constraint; each sequence gets its own matcher from it. */
export interface CompiledConstraint {
  create(): Promise<GrammarConstraint>;
}

export class ConstraintCompiler {
  readonly #compiler: XgCompiler;
  readonly #tokenizer: HfTokenizer;
  readonly #vocabSize: number;
  readonly #cache = new Map<string, Promise<XgCompiledGrammar>>();
  readonly #decoder = new TextDecoder();

  private constructor(compiler: XgCompiler, tokenizer: HfTokenizer, vocabSize: number) {
    this.#compiler = compiler;
    this.#tokenizer = tokenizer;
    this.#vocabSize = vocabSize;
  }

  static async create(tokenizer: HfTokenizer, vocabSize: number): Promise<ConstraintCompiler> {
    await initXgrammar();
    const info = await createTokenizerInfo(tokenizer, vocabSize, []);
    const compiler = await xgrammar().GrammarCompiler.createGrammarCompiler(info, true);
    return new ConstraintCompiler(compiler, tokenizer, vocabSize);
  }

  /** Why xgrammar rejects this schema, or undefined when it compiles. */
  async checkSchema(ref: SchemaRef): Promise<string | undefined> {
    try {
      checkSize((await withXgrammarErrors(() => compactJsonGrammar(ref))).length);
      return undefined;
    } catch (error) {
      if (error instanceof GrammarError) return error.message;
      throw error;
    }
  }

  /** Rejects with a GrammarError naming xgrammar's reason when the schema cannot be compiled. */
  async compile(spec: OutputConstraintSpec, layout: ConstraintLayout): Promise<CompiledConstraint> {
    const schemas: SchemaRef[] = [];
    const plan = buildStructuralTag(spec, layout, (schema) => {
      schemas.push(schema);
      return { type: "grammar", grammar: `@schema${schemas.length - 1}` };
    });
    const key = JSON.stringify([plan.tag, schemas]);
    let pending = this.#cache.get(key);
    if (pending === undefined) {
      pending = withXgrammarErrors(async () => {
        const grammars = await Promise.all(schemas.map((s) => compactJsonGrammar(s)));
        checkSize(grammars.reduce((n, g) => n + g.length, 0));
        const { tag } = buildStructuralTag(spec, layout, () => ({ type: "grammar", grammar: grammars.shift()! }));
        return this.#compiler.compileStructuralTag(tag);
      });
      this.#cache.set(key, pending);
      pending.catch(() => this.#cache.delete(key));
      if (this.#cache.size > CACHE_LIMIT) {
        const oldest = this.#cache.keys().next().value;
        if (oldest !== undefined) {
          // Matchers share the compiled grammar's state, so releasing the cache's handle is safe while they run.
          this.#cache.get(oldest)?.then((g) => g.dispose(), () => {});
          this.#cache.delete(oldest);
        }
      }
    } else {
      // Most recently used last, so eviction drops the least recently used.
      this.#cache.delete(key);
      this.#cache.set(key, pending);
    }
    const compiled = await pending;
    const endTokens = [...layout.endTokens];
    const tagStops = plan.stops.map((text) => text === undefined ? undefined : this.#tokenizer.specialId(text));
    return {
      create: async () => {
        const matcher = await xgrammar().GrammarMatcher.createGrammarMatcher(compiled, endTokens, false);
        return new GrammarConstraint({
          matcher,
          vocabSize: this.#vocabSize,
          endTokens,
          required: spec.required,
          triggers: plan.triggers,
          begins: plan.begins,
          tagStops,
          ends: plan.ends,
          addedTokens: this.#tokenizer.addedTokens.map((t) => ({ id: t.id, text: t.content })),
          tokenText: (id) => this.#decoder.decode(this.#tokenizer.tokenBytes(id)),
        });
      },
    };
  }
}
