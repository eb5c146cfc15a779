/**
 * Token ids → SSE bytes through the streaming core on one core, for a harmony and a simple (ChatML) output, at
 * 1, 4 and 8 tokens per engine step. The engine is replaced by pre-built chunks so only the pipeline is measured.
 * Prints `pipeline <harmony|simple> <K> tokens/step: <N> tokens/s`.
 */
import type { EngineChunk } from "../engine/engine.ts";
import type { Tokenizer } from "../engine/tokenizer.ts";
import type { OutputParser } from "../parsers/segment.ts";
import { CounterIds } from "../events/ids.ts";
import { responseSseStream, type ResponseTemplate } from "../events/pipeline.ts";
import { ChatmlParser } from "../parsers/chatml_parser.ts";
import { HarmonyParser } from "../parsers/harmony_parser.ts";
import { ToyTokenizer } from "../tests/support/toy_tokenizer.ts";

const TOKENS = 200_000;

const template: ResponseTemplate = {
  id: "resp_bench",
  createdAt: 1_700_000_000,
  model: "bench",
  instructions: null,
  tools: [],
  toolChoice: "auto",
  parallelToolCalls: true,
  temperature: 1,
  topP: 1,
  maxOutputTokens: null,
  metadata: {},
  previousResponseId: null,
  store: false,
  background: false,
  text: { format: { type: "text" } },
  reasoning: { effort: null, summary: null },
  truncation: "disabled",
  user: null,
  topLogprobs: null,
  serviceTier: "default",
};

interface Case {
  readonly name: "harmony" | "simple";
  readonly tokenizer: Tokenizer;
  readonly tokens: readonly number[];
  readonly parser: () => OutputParser;
}

/** Repeats `body` until the script holds at least `n` tokens, between `head` and `tail`. */
function script(tok: Tokenizer, head: string, body: string, tail: string, n: number): number[] {
  const unit = tok.encodeOrdinary(body);
  const out = tok.encode(head);
  while (out.length < n) out.push(...unit);
  out.push(...tok.encode(tail));
  return out;
}

function cases(): Case[] {
  const toy = new ToyTokenizer();
  const prose = "Hello world, the weather in Paris is mild; caf\u00e9 prices in \u20ac are rising. ";
  return [
    {
      name: "harmony",
      tokenizer: toy,
      // Reasoning then a final answer, as gpt-oss writes them.
      tokens: [
        ...script(toy, "<|channel|>analysis<|message|>", prose, "<|end|>", TOKENS / 2),
        ...script(toy, "<|start|>assistant<|channel|>final<|message|>", prose, "<|return|>", TOKENS / 2),
      ],
      parser: () => new HarmonyParser(toy, { toolNames: [] }),
    },
    {
      name: "simple",
      tokenizer: toy,
      // A ChatML answer after a short <think> block, as Qwen3-style models write them.
      tokens: script(toy, "<think>\nShort plan.\n</think>\n\n", prose, "<|im_end|>", TOKENS),
      parser: () => new ChatmlParser(toy, { toolNames: [] }),
    },
  ];
}

function chunksOf(tokens: readonly number[], k: number): EngineChunk[] {
  const chunks: EngineChunk[] = [];
  for (let i = 0; i < tokens.length; i += k) chunks.push({ type: "step", tokens: tokens.slice(i, i + k) });
  chunks.push({ type: "finish", reason: "stop", promptTokens: 10, outputTokens: tokens.length });
  return chunks;
}

function source(chunks: readonly EngineChunk[]): ReadableStream<EngineChunk> {
  let i = 0;
  return new ReadableStream<EngineChunk>({
    pull(controller) {
      const c = chunks[i++];
      if (c === undefined) controller.close();
      else controller.enqueue(c);
    },
  }, { highWaterMark: 0 });
}

/** Seconds to push the chunks through the pipeline, draining the SSE bytes. */
async function once(c: Case, chunks: readonly EngineChunk[]): Promise<number> {
  const t0 = performance.now();
  // The fused stream the HTTP layer serves (same cores as responseEventStream piped through sseEncoder).
  const sse = responseSseStream(source(chunks), {
    template,
    tokenizer: c.tokenizer,
    parser: c.parser(),
    ids: new CounterIds(),
  });
  let bytes = 0;
  for await (const b of sse) bytes += b.length;
  if (bytes === 0) throw new Error("pipeline produced no bytes");
  return (performance.now() - t0) / 1000;
}

export async function run(): Promise<void> {
  for (const c of cases()) {
    for (const k of [1, 4, 8]) {
      const chunks = chunksOf(c.tokens, k);
      await once(c, chunks); // warm-up: JIT and caches
      // Best of three: the machine is shared, and the minimum is the least disturbed run.
      const best = Math.min(await once(c, chunks), await once(c, chunks), await once(c, chunks));
      console.log(`pipeline ${c.name} ${k} tokens/step: ${Math.round(c.tokens.length / best)} tokens/s`);
    }
  }
}
