/**
 * Prometheus metrics of the HTTP layer, rendered in the text exposition format (version 0.0.4).
 *
 * Counters and histograms are updated by the request handlers; gauges (running/queued sequences, KV-cache use) are
 * read from the engine at scrape time so they are never stale.
 */
import type { EngineStats } from "../engine/engine.ts";

/** Upper bounds in seconds, chosen to resolve both a tiny CPU model (ms) and large GPU models (s). */
const TTFT_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
const TPOT_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1];

export class Histogram {
  readonly bounds: readonly number[];
  readonly counts: number[];
  sum = 0;
  count = 0;

  constructor(bounds: readonly number[]) {
    this.bounds = bounds;
    this.counts = bounds.map(() => 0);
  }

  observe(value: number): void {
    this.sum += value;
    this.count++;
    for (let i = 0; i < this.bounds.length; i++) {
      if (value <= this.bounds[i]!) this.counts[i]!++;
    }
  }
}

function escapeLabel(value: string): string {
  return value.replaceAll("\\", "\\\\").replaceAll('"', '\\"').replaceAll("\n", "\\n");
}

export class Metrics {
  /** key = `route\u0000status` */
  readonly #requests = new Map<string, number>();
  promptTokens = 0;
  generationTokens = 0;
  aborted = 0;
  readonly ttft = new Histogram(TTFT_BUCKETS);
  readonly tpot = new Histogram(TPOT_BUCKETS);

  /** `route` is the route pattern (e.g. `/v1/responses/{id}`), never the raw path, so label cardinality stays fixed. */
  countRequest(route: string, status: number): void {
    const key = `${route}\u0000${status}`;
    this.#requests.set(key, (this.#requests.get(key) ?? 0) + 1);
  }

  requestCount(route: string, status: number): number {
    return this.#requests.get(`${route}\u0000${status}`) ?? 0;
  }

  /** One finished generation: its token counts and timing (seconds). */
  observeGeneration(g: {
    promptTokens: number;
    outputTokens: number;
    ttft: number | null;
    decodeSeconds: number | null;
    aborted: boolean;
  }): void {
    this.promptTokens += g.promptTokens;
    this.generationTokens += g.outputTokens;
    if (g.aborted) this.aborted++;
    if (g.ttft !== null) this.ttft.observe(g.ttft);
    if (g.decodeSeconds !== null && g.outputTokens > 1) this.tpot.observe(g.decodeSeconds / (g.outputTokens - 1));
  }

  render(stats: EngineStats, modelName: string): string {
    const model = `model_name="${escapeLabel(modelName)}"`;
    const lines: string[] = [];
    const head = (name: string, type: string, help: string) =>
      lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`);

    head("rill_http_requests_total", "counter", "HTTP requests by route and status code.");
    for (const [key, n] of [...this.#requests].sort(([a], [b]) => a.localeCompare(b))) {
      const [route, status] = key.split("\u0000");
      lines.push(`rill_http_requests_total{route="${escapeLabel(route!)}",status="${status}"} ${n}`);
    }
    head("rill_prompt_tokens_total", "counter", "Prompt tokens processed.");
    lines.push(`rill_prompt_tokens_total{${model}} ${this.promptTokens}`);
    head("rill_generation_tokens_total", "counter", "Output tokens generated.");
    lines.push(`rill_generation_tokens_total{${model}} ${this.generationTokens}`);
    head("rill_requests_aborted_total", "counter", "Generations aborted by a client disconnect, a cancel or shutdown.");
    lines.push(`rill_requests_aborted_total{${model}} ${this.aborted}`);
    this.#histogram(
      lines,
      "rill_time_to_first_token_seconds",
      "Time from request to first output token.",
      this.ttft,
      model,
    );
    this.#histogram(
      lines,
      "rill_time_per_output_token_seconds",
      "Mean time per output token after the first.",
      this.tpot,
      model,
    );
    head("rill_num_requests_running", "gauge", "Sequences being generated.");
    lines.push(`rill_num_requests_running{${model}} ${stats.running}`);
    head("rill_num_requests_waiting", "gauge", "Sequences queued for the engine.");
    lines.push(`rill_num_requests_waiting{${model}} ${stats.waiting}`);
    head("rill_kv_cache_usage_perc", "gauge", "Fraction of the KV cache in use (0..1): blocks held / blocks.");
    lines.push(`rill_kv_cache_usage_perc{${model}} ${stats.kvCacheUsage}`);
    // Paged-KV series: only engines with a block pool report them.
    const gauge = (name: string, help: string, value: number | undefined, type = "gauge") => {
      if (value === undefined) return;
      head(name, type, help);
      lines.push(`${name}{${model}} ${value}`);
    };
    gauge("rill_kv_cache_blocks_used", "KV-cache blocks held by running sequences.", stats.kvBlocksUsed);
    gauge("rill_kv_cache_blocks_total", "KV-cache blocks in the pool.", stats.kvBlocksTotal);
    gauge(
      "rill_prefix_cache_queries_total",
      "Prompt tokens looked up in the prefix cache.",
      stats.prefixCacheQueriedTokens,
      "counter",
    );
    gauge(
      "rill_prefix_cache_hits_total",
      "Prompt tokens served from the prefix cache.",
      stats.prefixCacheHitTokens,
      "counter",
    );
    if (stats.prefixCacheQueriedTokens !== undefined && stats.prefixCacheHitTokens !== undefined) {
      const q = stats.prefixCacheQueriedTokens;
      gauge(
        "rill_prefix_cache_hit_rate",
        "Prefix-cache hits / queries, in tokens (0..1).",
        q > 0 ? stats.prefixCacheHitTokens / q : 0,
      );
    }
    gauge(
      "rill_num_preemptions_total",
      "Sequences preempted (KV blocks given back, recomputed later) when blocks ran out.",
      stats.preemptions,
      "counter",
    );
    gauge("rill_requests_admitted_total", "Requests admitted to the batch after queueing.", stats.admitted, "counter");
    gauge(
      "rill_request_queue_time_seconds_total",
      "Seconds admitted requests spent waiting in the queue, in total (÷ admitted = mean queue time).",
      stats.queueTimeSeconds,
      "counter",
    );
    return lines.join("\n") + "\n";
  }

  #histogram(lines: string[], name: string, help: string, h: Histogram, labels: string): void {
    lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} histogram`);
    h.bounds.forEach((bound, i) => lines.push(`${name}_bucket{${labels},le="${bound}"} ${h.counts[i]}`));
    lines.push(`${name}_bucket{${labels},le="+Inf"} ${h.count}`);
    lines.push(`${name}_sum{${labels}} ${h.sum}`);
    lines.push(`${name}_count{${labels}} ${h.count}`);
  }
}
