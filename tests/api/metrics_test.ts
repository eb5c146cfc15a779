import assert from "node:assert/strict";
import { Metrics } from "../../api/metrics.ts";

/** Every series issue 3 asks /metrics for, with its Prometheus type. */
const SERIES: readonly (readonly [string, "counter" | "gauge" | "histogram"])[] = [
  ["rill_http_requests_total", "counter"], // requests by route and status
  ["rill_prompt_tokens_total", "counter"], // tokens in
  ["rill_generation_tokens_total", "counter"], // tokens out
  ["rill_time_to_first_token_seconds", "histogram"],
  ["rill_time_per_output_token_seconds", "histogram"],
  ["rill_num_requests_running", "gauge"],
  ["rill_num_requests_waiting", "gauge"],
  ["rill_kv_cache_usage_perc", "gauge"],
  ["rill_requests_aborted_total", "counter"],
];

function sample(text: string, name: string): number {
  const m = new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, "m").exec(text);
  assert.ok(m !== null, `no sample of ${name}`);
  return Number(m[1]);
}

Deno.test("metrics: every series is declared with HELP and TYPE and has a sample", () => {
  const metrics = new Metrics();
  metrics.countRequest("/v1/responses", 200);
  const text = metrics.render({ running: 2, waiting: 3, kvCacheUsage: 0.25 }, "m");
  for (const [name, type] of SERIES) {
    assert.match(text, new RegExp(`^# HELP ${name} \\S`, "m"), name);
    assert.match(text, new RegExp(`^# TYPE ${name} ${type}$`, "m"), name);
    const sampleName = type === "histogram" ? `${name}_count` : name;
    assert.ok(Number.isFinite(sample(text, sampleName)), name);
  }
  assert.equal(sample(text, "rill_num_requests_running"), 2);
  assert.equal(sample(text, "rill_num_requests_waiting"), 3);
  assert.equal(sample(text, "rill_kv_cache_usage_perc"), 0.25);
  assert.match(text, /^rill_http_requests_total\{route="\/v1\/responses",status="200"\} 1$/m);
});

Deno.test("metrics: generations feed tokens, TTFT, TPOT and aborts; histograms are cumulative", () => {
  const metrics = new Metrics();
  metrics.observeGeneration({ promptTokens: 10, outputTokens: 5, ttft: 0.003, decodeSeconds: 0.008, aborted: false });
  metrics.observeGeneration({ promptTokens: 7, outputTokens: 1, ttft: 2, decodeSeconds: 0, aborted: true });
  metrics.observeGeneration({ promptTokens: 4, outputTokens: 0, ttft: null, decodeSeconds: null, aborted: true });
  const text = metrics.render({ running: 0, waiting: 0, kvCacheUsage: 0 }, "m");
  assert.equal(sample(text, "rill_prompt_tokens_total"), 21);
  assert.equal(sample(text, "rill_generation_tokens_total"), 6);
  assert.equal(sample(text, "rill_requests_aborted_total"), 2);
  assert.equal(sample(text, "rill_time_to_first_token_seconds_count"), 2);
  assert.match(text, /^rill_time_to_first_token_seconds_bucket\{model_name="m",le="0\.005"\} 1$/m);
  assert.match(text, /^rill_time_to_first_token_seconds_bucket\{model_name="m",le="\+Inf"\} 2$/m);
  // TPOT needs two output tokens: (0.008 s) / 4 tokens after the first.
  assert.equal(sample(text, "rill_time_per_output_token_seconds_count"), 1);
  assert.equal(sample(text, "rill_time_per_output_token_seconds_sum"), 0.002);
  assert.match(text, /^rill_time_per_output_token_seconds_bucket\{model_name="m",le="0\.001"\} 0$/m);
  assert.match(text, /^rill_time_per_output_token_seconds_bucket\{model_name="m",le="0\.0025"\} 1$/m);
});

Deno.test("metrics: paged-KV series (blocks used/total, prefix-cache queries/hits/hit rate, preemptions, queue time)", () => {
  const metrics = new Metrics();
  const text = metrics.render({
    running: 3,
    waiting: 1,
    kvCacheUsage: 0.125,
    kvBlocksUsed: 16,
    kvBlocksTotal: 128,
    prefixCacheQueriedTokens: 400,
    prefixCacheHitTokens: 100,
    preemptions: 2,
    admitted: 5,
    queueTimeSeconds: 0.75,
  }, "m");
  const want: [string, string, number][] = [
    ["rill_kv_cache_blocks_used", "gauge", 16],
    ["rill_kv_cache_blocks_total", "gauge", 128],
    ["rill_prefix_cache_queries_total", "counter", 400],
    ["rill_prefix_cache_hits_total", "counter", 100],
    ["rill_prefix_cache_hit_rate", "gauge", 0.25],
    ["rill_num_preemptions_total", "counter", 2],
    ["rill_requests_admitted_total", "counter", 5],
    ["rill_request_queue_time_seconds_total", "counter", 0.75],
  ];
  for (const [name, type, value] of want) {
    assert.match(text, new RegExp(`^# TYPE ${name} ${type}$`, "m"), name);
    assert.equal(sample(text, name), value, name);
  }
  // An engine without a block pool reports none of them.
  const bare = metrics.render({ running: 0, waiting: 0, kvCacheUsage: 0 }, "m");
  assert.doesNotMatch(bare, /rill_kv_cache_blocks_used|rill_num_preemptions_total/);
});
