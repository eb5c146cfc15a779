/**
 * Loads `@mlc-ai/web-xgrammar` once per process. The package is a UMD bundle inside a `"type": "module"` package, so
 * neither `import` nor `require` accepts it; its text is evaluated as the CommonJS module it is, with the CommonJS
 * globals its Emscripten loader reads (`require`, `__filename`, `__dirname`).
 *
 * Only the members rill uses are typed. `GetNextTokenBitmask` is called on the matcher's binding handle because the
 * public wrapper is async (it awaits an initialisation that `load` has already done) and the engine fills masks
 * synchronously inside a step.
 */
import { createRequire } from "node:module";

export interface XgVector {
  size(): number;
  get(i: number): number;
  delete(): void;
}

export interface XgMatcher {
  readonly handle: { GetNextTokenBitmask(vocabSize: number): XgVector };
  acceptToken(token: number): boolean;
  rollBack(count: number): void;
  isTerminated(): boolean;
  dispose(): void;
}

export interface XgCompiledGrammar {
  dispose(): void;
}

export interface XgTokenizerInfo {
  getVocabSize(): number;
}

export interface XgCompiler {
  compileJSONSchema(
    schema: string,
    anyWhitespace?: boolean,
    indent?: number,
    separators?: [string, string],
    strictMode?: boolean,
  ): Promise<XgCompiledGrammar>;
  compileBuiltinJSONGrammar(): Promise<XgCompiledGrammar>;
  compileStructuralTag(tag: Record<string, unknown>): Promise<XgCompiledGrammar>;
}

export interface XGrammar {
  Grammar: {
    fromJSONSchema(
      schema: string,
      anyWhitespace: boolean,
      indent: number,
      separators: [string, string],
      strictMode: boolean,
      maxWhitespaceCnt?: number,
    ): Promise<{ toString(): string; dispose(): void }>;
  };
  TokenizerInfo: {
    createTokenizerInfo(
      encodedVocab: string[],
      vocabType: string,
      prependSpaceInTokenization: boolean,
      vocabSize: number,
      stopTokenIds: number[],
    ): Promise<XgTokenizerInfo>;
  };
  GrammarCompiler: { createGrammarCompiler(info: XgTokenizerInfo, cacheEnabled?: boolean): Promise<XgCompiler> };
  GrammarMatcher: {
    createGrammarMatcher(
      grammar: XgCompiledGrammar,
      overrideStopTokens?: number[] | undefined,
      terminateWithoutStopToken?: boolean,
    ): Promise<XgMatcher>;
  };
}

let loaded: XGrammar | undefined;

/** The xgrammar module, evaluated on first use. */
export function xgrammar(): XGrammar {
  if (loaded !== undefined) return loaded;
  const require = createRequire(import.meta.url);
  const path = require.resolve("@mlc-ai/web-xgrammar");
  const source = Deno.readTextFileSync(path);
  const module = { exports: {} as Record<string, unknown> };
  const dir = path.slice(0, path.lastIndexOf("/"));
  new Function("module", "exports", "require", "__filename", "__dirname", source)(
    module,
    module.exports,
    require,
    path,
    dir,
  );
  loaded = module.exports as unknown as XGrammar;
  return loaded;
}

/** Receives xgrammar's error output while a call runs under `withXgrammarErrors`. */
let errorSink: ((line: string) => void) | undefined;
let initialised: Promise<void> | undefined;

/**
 * Initialises the WebAssembly module with its error printer routed through `errorSink`. Emscripten binds
 * `console.error` once, when the module starts, so the router is installed around that moment only; outside a
 * `withXgrammarErrors` call the lines still go to the real console.error.
 */
export function initXgrammar(): Promise<void> {
  initialised ??= (async () => {
    const original = console.error;
    console.error = (...args: unknown[]) => {
      if (errorSink !== undefined) errorSink(args.map(String).join(" "));
      else original(...args);
    };
    const router = console.error;
    try {
      const grammar = await xgrammar().Grammar.fromJSONSchema("{}", false, -1, [",", ":"], true);
      grammar.dispose();
    } finally {
      if (console.error === router) console.error = original;
    }
  })();
  return initialised;
}

/**
 * xgrammar reports a rejected grammar by printing a `[FATAL] file:line: reason` line and throwing a bare
 * `RuntimeError: Aborted()`. Runs `fn` with that output captured so the reason reaches the caller; the module stays
 * usable after such an error.
 */
export async function withXgrammarErrors<T>(fn: () => Promise<T>): Promise<T> {
  await initXgrammar();
  const lines: string[] = [];
  errorSink = (line) => void lines.push(line);
  try {
    return await fn();
  } catch (e) {
    const fatal = lines.find((l) => l.includes("[FATAL]"));
    const reason = fatal !== undefined ? fatal.replace(/^.*\[FATAL\]\s*\S+:\d+:\s*/, "") : String(e);
    throw new GrammarError(reason.replace(/^Check failed: \(.*?\) is false: /, ""));
  } finally {
    errorSink = undefined;
  }
}

export class GrammarError extends Error {
  override readonly name = "GrammarError";
}
