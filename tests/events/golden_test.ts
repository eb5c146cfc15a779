/**
 * Golden fixtures: token ids in, the full event list out (tests/fixtures/golden/*.json), for every harmony.md §5
 * vector including the extra malformed ones (`harmony_x*`, real o200k ids) and the ChatML cases (toy tokenizer). Each fixture stores its input and the expected events
 * for one token per step; the same tokens all in one step must give the same events modulo delta boundaries.
 *
 * Regenerate after an intended change with `RILL_UPDATE_GOLDEN=1 deno test -A tests/events/golden_test.ts` and
 * `deno fmt tests/fixtures/golden`, then review the diff. A fixture without events (a new case) fails until regenerated.
 */
import assert from "node:assert/strict";
import type { FinishReason } from "../../engine/engine.ts";
import type { Tokenizer } from "../../checkpoint/tokenizer.ts";
import { CounterIds } from "../../events/ids.ts";
import { collectResponse } from "../../events/pipeline.ts";
import type { ResponseStreamEvent } from "../../events/types.ts";
import { ChatmlParser } from "../../parsers/chatml_parser.ts";
import { HarmonyParser } from "../../parsers/harmony_parser.ts";
import type { OutputParser } from "../../parsers/segment.ts";
import { modDeltaBoundaries, structuralProblems } from "../../testing/stream_checks.ts";
import { type Chunking, replayTokens } from "../../testing/scripted_engine.ts";
import { o200kTokenizer } from "../../testing/o200k_tokenizer.ts";
import { ToyTokenizer } from "../../testing/toy_tokenizer.ts";
import { clock, toolTemplate as template } from "../../testing/response_fixtures.ts";
import { validateStream } from "../../conformance/validator.ts";

interface Fixture {
  name: string;
  tokenizer: "o200k" | "toy";
  parser:
    | { type: "harmony"; toolNames: string[] }
    | {
      type: "chatml";
      toolNames: string[];
      startInReasoning: boolean;
      reasoningStart?: string;
      reasoningEnd?: string;
    };
  finish: FinishReason;
  /** The model output itself is invalid UTF-8, so U+FFFD in the text is right (validator invariant 53). */
  invalidUtf8?: boolean;
  promptTokens: number;
  tokens: number[];
  events: unknown[] | null;
}

const dir = new URL("../fixtures/golden/", import.meta.url);
const update = Deno.env.get("RILL_UPDATE_GOLDEN") === "1";
const toy = new ToyTokenizer();

function tokenizerOf(f: Fixture): Tokenizer {
  return f.tokenizer === "o200k" ? o200kTokenizer() : toy;
}

function parserOf(f: Fixture, tokenizer: Tokenizer): OutputParser {
  const p = f.parser;
  if (p.type === "harmony") return new HarmonyParser(tokenizer, { toolNames: p.toolNames });
  return new ChatmlParser(tokenizer, {
    toolNames: p.toolNames,
    startInReasoning: p.startInReasoning,
    ...(p.reasoningStart === undefined ? {} : { reasoningStart: p.reasoningStart }),
    ...(p.reasoningEnd === undefined ? {} : { reasoningEnd: p.reasoningEnd }),
  });
}

async function eventsOf(f: Fixture, chunking: Chunking): Promise<ResponseStreamEvent[]> {
  const tokenizer = tokenizerOf(f);
  const { events } = await collectResponse(
    replayTokens(f.tokens, chunking, { finish: f.finish, promptTokens: f.promptTokens }),
    { template, tokenizer, parser: parserOf(f, tokenizer), ids: new CounterIds(), clock },
  );
  return events;
}

const files = [...Deno.readDirSync(dir)].filter((e) => e.name.endsWith(".json")).map((e) => e.name).sort();

Deno.test("golden fixtures exist for harmony and ChatML", () => {
  assert.ok(files.filter((f) => f.startsWith("harmony_")).length >= 31);
  assert.ok(files.filter((f) => f.startsWith("chatml_")).length >= 12);
});

for (const file of files) {
  const url = new URL(file, dir);
  const fixture: Fixture = JSON.parse(Deno.readTextFileSync(url));
  Deno.test(`golden: ${fixture.name}`, async () => {
    const events = await eventsOf(fixture, "one");
    assert.deepEqual(structuralProblems(events), []);
    const actual: unknown[] = JSON.parse(JSON.stringify(events));
    // The parsers keep malformed markup visible rather than drop it (harmony.md §2.8), so 58 is not judged here.
    const allowReplacementChar = fixture.invalidUtf8 === true;
    assert.deepEqual(validateStream(actual, { allowMarkup: true, allowReplacementChar }), []);
    if (update) {
      Deno.writeTextFileSync(url, JSON.stringify({ ...fixture, events: actual }, null, 1) + "\n");
    } else {
      assert.ok(fixture.events !== null, `${file} has no expected events: regenerate with RILL_UPDATE_GOLDEN=1`);
      assert.deepEqual(actual, fixture.events);
    }
    const allAtOnce = await eventsOf(fixture, "all");
    assert.deepEqual(modDeltaBoundaries(allAtOnce), modDeltaBoundaries(events));
  });
}
