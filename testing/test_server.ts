/**
 * A real rill HTTP server on a free loopback port, over the ScriptedEngine and the harmony format on the o200k
 * tokenizer. The script answers like a tiny tool-using model: with function tools and no tool result yet it calls
 * the first tool; otherwise it reasons briefly and answers.
 */
import type { ChatFormat } from "../prompt/chat_format.ts";
import { createHarmonyFormat } from "../prompt/harmony_format.ts";
import { ChatmlParser } from "../parsers/chatml_parser.ts";
import type { GenerateRequest } from "../engine/engine.ts";
import type { Tokenizer } from "../checkpoint/tokenizer.ts";
import { createServer, type RillServer, type ServerOptions } from "../server/server.ts";
import { SqliteStore } from "../api/store/sqlite_store.ts";
import { O200kTokenizer } from "./o200k_tokenizer.ts";
import { type Chunking, ScriptedEngine } from "./scripted_engine.ts";

export const MODEL = "rill-test";

let shared: Tokenizer | null = null;
export function tokenizer(): Tokenizer {
  shared ??= new O200kTokenizer();
  return shared;
}

/** A template-format model on the test tokenizer: harmony's prompt, ChatML `<tool_call>` output. */
export function chatmlFormat(): ChatFormat {
  const tok = tokenizer();
  return {
    ...createHarmonyFormat(tok),
    name: "chatml",
    toolCallEnd: "</tool_call>",
    createParser: ({ toolNames }) => new ChatmlParser(tok, { toolNames }),
  };
}

export const ANSWER = "Hello from rill! ✓";
export const REASONING = "The user greets me.";

/** Harmony completion text (what follows `<|start|>assistant` in the prompt). */
export function answerText(answer = ANSWER): string {
  return `<|channel|>analysis<|message|>${REASONING}<|end|><|start|>assistant<|channel|>final<|message|>${answer}<|return|>`;
}

export function toolCallText(name: string, args: string): string {
  return `<|channel|>analysis<|message|>Need a tool.<|end|><|start|>assistant<|channel|>commentary to=functions.${name} <|constrain|>json<|message|>${args}<|call|>`;
}

/** Picks the completion from the rendered prompt, like a model would. */
export function defaultScript(tok: Tokenizer): (request: GenerateRequest) => readonly number[] {
  return (request) => {
    const prompt = tok.decode(request.promptTokens);
    const tool = /## functions\s+namespace functions \{\s+(?:\/\/[^\n]*\n\s*)*type (\w+)/.exec(prompt);
    const answeredTool = /<\|start\|>functions\.[\w]+ to=assistant/.test(
      prompt.slice(prompt.lastIndexOf("<|start|>user")),
    );
    if (tool !== null && !answeredTool) {
      return tok.encode(toolCallText(tool[1]!, '{"city":"Paris"}'));
    }
    return tok.encode(answerText(answeredTool ? "It is sunny in Paris." : ANSWER));
  };
}

export interface TestServerOptions {
  readonly chunking?: Chunking;
  readonly stepDelayMs?: number;
  readonly queueSize?: number;
  readonly maxModelLen?: number;
  readonly script?: readonly number[] | ((request: GenerateRequest) => readonly number[]);
  readonly server?: Partial<ServerOptions>;
  readonly storePath?: string;
}

export interface TestServer {
  readonly server: RillServer;
  readonly engine: ScriptedEngine;
  readonly store: SqliteStore;
  readonly url: string;
  readonly baseURL: string;
  close(): Promise<void>;
}

export function startTestServer(options: TestServerOptions = {}): TestServer {
  const tok = tokenizer();
  const engine = new ScriptedEngine({
    tokenizer: tok,
    script: options.script ?? defaultScript(tok),
    chunking: options.chunking ?? { seed: 7, max: 4 },
    modelId: MODEL,
    maxModelLen: options.maxModelLen ?? 8192,
    ...(options.stepDelayMs === undefined ? {} : { stepDelayMs: options.stepDelayMs }),
    ...(options.queueSize === undefined ? {} : { queueSize: options.queueSize }),
  });
  const store = SqliteStore.open(options.storePath ?? ":memory:");
  const server = createServer({
    engine,
    format: createHarmonyFormat(tok),
    modelId: MODEL,
    store,
    port: 0,
    ...options.server,
  });
  return {
    server,
    engine,
    store,
    url: server.url,
    baseURL: `${server.url}/v1`,
    async close() {
      await server.shutdown(2000);
      await store.close();
    },
  };
}

export async function postJson(url: string, body: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
  });
}
