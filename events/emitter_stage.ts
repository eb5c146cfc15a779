/**
 * The per-response emitter: the one state machine that turns parsed segments into Responses events.
 *
 * Invariants it holds by construction (responses-streaming.md §5.14):
 * - It alone owns `output_index` (0,1,2… in `output_item.added` order), `content_index` (one part per item, so
 *   always 0, i.e. reset per item) and item ids, minted once at `output_item.added` and reused by every later event.
 * - Items are strictly sequential: an item's done events all precede the next item's `output_item.added`.
 * - Every item that is open when generation ends gets all its done events.
 * - Texts are accumulated once; the `*.done` text, the part, the done item and the terminal `response.output` entry
 *   are built from that one string, and `response.output` holds the very objects sent in `output_item.done`.
 * - Consecutive deltas of one item within one engine step are merged into one delta event: a chunk carries a whole
 *   step, and fewer events change nothing a client can observe except delta boundaries.
 *
 * Finish reasons map to: stop → `response.completed`; length → the cut item `incomplete` (a web_search_call,
 * whose status has no such value, closes completed) and `response.incomplete` (reason max_output_tokens); error → an `error` event then `response.failed` (an item open at that moment gets no
 * done event and is left out of `output`); abort → the open item is closed `incomplete`, no terminal event is sent
 * (the spec has none for cancellation) and `response` reports status "cancelled".
 */
import type { FinishReason } from "../engine/engine.ts";
import type { ItemKind, Segment } from "../parsers/segment.ts";
import * as b from "./builders.ts";
import type { IdSource } from "./ids.ts";
import type { ParsedChunk } from "./parsed_chunk.ts";
import { buildResponse, type ResponseTemplate } from "./response_template.ts";
import type {
  ItemStatus,
  Logprob,
  OutputItem,
  Response,
  ResponseError,
  UnsequencedEvent,
  Usage,
  WebSearchAction,
} from "./types.ts";

export interface EmitterOptions {
  readonly template: ResponseTemplate;
  readonly ids: IdSource;
  /** Unix seconds, for `completed_at`. */
  readonly clock?: () => number;
  /** Seals a closed reasoning item's text into its `encrypted_content` (include `reasoning.encrypted_content`). */
  readonly sealReasoning?: (text: string) => string;
}

const NO_LOGPROBS: readonly Logprob[] = Object.freeze([]);

/** The item currently streaming, with everything needed to close it. */
interface OpenItem {
  readonly kind: ItemKind;
  readonly ref: b.PartRef;
  /** Set when the model supplied or we minted one (function calls only). */
  readonly callId: string;
  /** Container id (code interpreter only). */
  readonly containerId: string;
  text: string;
  logprobs: Logprob[] | null;
}

export class ResponseEmitter {
  readonly #template: ResponseTemplate;
  readonly #ids: IdSource;
  readonly #clock: () => number;
  readonly #seal: ((text: string) => string) | undefined;
  readonly #output: OutputItem[] = [];
  #open: OpenItem | null = null;
  /** The open item was closed implicitly (end of generation); whether it was cut depends on the finish reason. */
  #closePending = false;
  /** Delta text of the open item not yet sent as an event (merged within one push). */
  #pendingDelta = "";
  #pendingLogprobs: Logprob[] | null = null;
  #nextIndex = 0;
  #state: "new" | "created" | "running" | "ended" = "new";
  #final: Response | null = null;

  constructor(options: EmitterOptions) {
    this.#template = options.template;
    this.#ids = options.ids;
    this.#clock = options.clock ?? (() => Math.floor(Date.now() / 1000));
    this.#seal = options.sealReasoning;
  }

  /** True once a finish was handled; later pushes are ignored. */
  get ended(): boolean {
    return this.#state === "ended";
  }

  /** The final Response (terminal event's payload, or the cancelled response); null until the finish. */
  get response(): Response | null {
    return this.#final;
  }

  /**
   * The opening events, sent before the engine produces anything: `response.created` then, for a foreground
   * response, `response.in_progress`; for a background one, `response.queued` (in_progress follows on the first
   * chunk).
   */
  start(): UnsequencedEvent[] {
    const out: UnsequencedEvent[] = [];
    this.startInto(out);
    return out;
  }

  /** `start`, appending to `out` (the fused pipeline's one array per step). */
  startInto(out: UnsequencedEvent[]): void {
    if (this.#state !== "new") return;
    this.#state = "created";
    if (this.#template.background) {
      const queued = this.#snapshot("queued");
      out.push(b.responseCreated(queued), b.responseQueued(queued));
      return;
    }
    const running = this.#snapshot("in_progress");
    this.#state = "running";
    out.push(b.responseCreated(running), b.responseInProgress(running));
  }

  push(chunk: ParsedChunk): UnsequencedEvent[] {
    const out: UnsequencedEvent[] = [];
    this.pushInto(chunk, out);
    return out;
  }

  /** `push`, appending to `out`. */
  pushInto(chunk: ParsedChunk, out: UnsequencedEvent[]): void {
    switch (chunk.type) {
      case "finish":
        if (this.#begin(out)) this.#finish(out, chunk.reason, chunk.usage, chunk.message, chunk.code);
        return;
      case "segments":
        this.pushSegments(chunk.segments, chunk.segments.length, out);
        return;
      default: {
        const never: never = chunk;
        throw new Error(`unknown parsed chunk ${JSON.stringify(never)}`);
      }
    }
  }

  /**
   * One engine step's segments, the first `count` of `segments` (the fused pipeline reuses one buffer per response;
   * the emitter keeps no reference to it), appending the events to `out`.
   */
  pushSegments(segments: readonly Segment[], count: number, out: UnsequencedEvent[]): void {
    if (!this.#begin(out)) return;
    for (let i = 0; i < count; i++) {
      const seg = segments[i]!;
      switch (seg.kind) {
        case "open":
          this.#closeOpen(out, "completed");
          this.#openItem(out, seg.item);
          break;
        case "delta":
          if (this.#open === null || this.#closePending) {
            // A delta outside any item is a parser bug; keep the text visible rather than drop it.
            this.#closeOpen(out, "completed");
            this.#openItem(out, { type: "message" });
          }
          this.#pendingDelta += seg.text;
          if (seg.logprobs !== undefined && seg.logprobs.length > 0 && this.#open!.logprobs !== null) {
            const lp = this.#pendingLogprobs ?? (this.#pendingLogprobs = []);
            for (const l of seg.logprobs) lp.push(l);
          }
          break;
        case "close":
          if (seg.reason === "implicit") {
            this.#flushDelta(out);
            this.#closePending = this.#open !== null;
          } else {
            this.#closeOpen(out, "completed");
          }
          break;
        default:
          throw new Error(`unknown segment ${(seg satisfies never as { kind: string }).kind}`);
      }
    }
    this.#flushDelta(out);
  }

  /** The opening events not sent yet (a push before `start`, a background response's in_progress); false once ended. */
  #begin(out: UnsequencedEvent[]): boolean {
    if (this.#state === "new") this.startInto(out);
    if (this.#state === "ended") return false;
    if (this.#state === "created") {
      this.#state = "running";
      out.push(b.responseInProgress(this.#snapshot("in_progress")));
    }
    return true;
  }

  #snapshot(status: "queued" | "in_progress"): Response {
    return buildResponse(this.#template, { status, output: [], usage: null });
  }

  #openItem(out: UnsequencedEvent[], kind: ItemKind): void {
    const outputIndex = this.#nextIndex++;
    const itemId = this.#ids.next(idPrefix(kind));
    const ref: b.PartRef = { itemId, outputIndex, contentIndex: 0 };
    const callId = kind.type === "function_call" ? kind.callId || this.#ids.next("call") : "";
    const containerId = kind.type === "code_interpreter_call" ? this.#ids.next("cntr") : "";
    const open: OpenItem = {
      kind,
      ref,
      callId,
      containerId,
      text: "",
      logprobs: kind.type === "message" ? [] : null,
    };
    this.#open = open;
    this.#closePending = false;
    out.push(b.outputItemAdded(outputIndex, itemOf(open, "", "in_progress", NO_LOGPROBS)));
    switch (kind.type) {
      case "message":
        out.push(b.contentPartAdded(ref, { type: "output_text", text: "", annotations: [], logprobs: [] }));
        break;
      case "reasoning":
        out.push(b.contentPartAdded(ref, { type: "reasoning_text", text: "" }));
        break;
      case "function_call":
        break;
      case "web_search_call":
        out.push(b.webSearchCallInProgress(ref));
        break;
      case "code_interpreter_call":
        out.push(b.codeInterpreterCallInProgress(ref));
        break;
      case "mcp_call":
        out.push(b.mcpCallInProgress(ref));
        break;
      default:
        throw new Error(`unknown item kind ${(kind satisfies never as { type: string }).type}`);
    }
  }

  /** Sends the merged delta of the open item, if any. Empty deltas are never sent. */
  #flushDelta(out: UnsequencedEvent[]): void {
    const open = this.#open;
    const delta = this.#pendingDelta;
    if (open === null || delta === "") return;
    this.#pendingDelta = "";
    open.text += delta;
    const ref = open.ref;
    switch (open.kind.type) {
      case "message": {
        const lp = this.#pendingLogprobs;
        this.#pendingLogprobs = null;
        if (lp !== null) { for (const l of lp) open.logprobs!.push(l); }
        out.push(b.outputTextDelta(ref, delta, lp ?? NO_LOGPROBS));
        break;
      }
      case "reasoning":
        out.push(b.reasoningTextDelta(ref, delta));
        break;
      case "function_call":
        out.push(b.functionCallArgumentsDelta(ref, delta));
        break;
      case "web_search_call":
        // The action's arguments are kept for the done item; the spec streams nothing for a search.
        break;
      case "code_interpreter_call":
        out.push(b.codeInterpreterCallCodeDelta(ref, delta));
        break;
      case "mcp_call":
        out.push(b.mcpCallArgumentsDelta(ref, delta));
        break;
      default:
        throw new Error(`unknown item kind ${(open.kind satisfies never as { type: string }).type}`);
    }
  }

  /** Sends every done event of the open item, in grammar order, and appends the done item to `output`. */
  #closeOpen(out: UnsequencedEvent[], status: "completed" | "incomplete"): void {
    this.#flushDelta(out);
    const open = this.#open;
    if (open === null) return;
    this.#open = null;
    this.#closePending = false;
    // Logprobs of tokens that produced no text (e.g. half a character at the very end) still belong to the part.
    if (this.#pendingLogprobs !== null && open.logprobs !== null) {
      for (const l of this.#pendingLogprobs) open.logprobs.push(l);
    }
    this.#pendingLogprobs = null;
    const { ref, text } = open;
    const logprobs = open.logprobs ?? NO_LOGPROBS;
    const plain = itemOf(open, text, status, logprobs);
    const item = plain.type === "reasoning" && this.#seal !== undefined
      ? { ...plain, encrypted_content: this.#seal(text) }
      : plain;
    switch (open.kind.type) {
      case "message": {
        // The part object sent in content_part.done is the very one inside the done item.
        const part = item.type === "message" ? item.content[0] : undefined;
        out.push(b.outputTextDone(ref, text, logprobs));
        if (part !== undefined) out.push(b.contentPartDone(ref, part));
        break;
      }
      case "reasoning":
        out.push(b.reasoningTextDone(ref, text), b.contentPartDone(ref, { type: "reasoning_text", text }));
        break;
      case "function_call":
        out.push(b.functionCallArgumentsDone(ref, text, open.kind.name));
        break;
      case "web_search_call":
        // web_search_call has no "incomplete" status (SDK enum, validator 36) and its grammar must run to
        // completed unless the item is incomplete (78), so a cut call still closes completed with what it has.
        out.push(b.webSearchCallSearching(ref), b.webSearchCallCompleted(ref));
        break;
      case "code_interpreter_call":
        out.push(b.codeInterpreterCallCodeDone(ref, text));
        if (status === "completed") {
          out.push(b.codeInterpreterCallInterpreting(ref), b.codeInterpreterCallCompleted(ref));
        }
        break;
      case "mcp_call":
        out.push(b.mcpCallArgumentsDone(ref, text));
        if (status === "completed") out.push(b.mcpCallCompleted(ref));
        break;
      default:
        throw new Error(`unknown item kind ${(open.kind satisfies never as { type: string }).type}`);
    }
    out.push(b.outputItemDone(ref.outputIndex, item));
    this.#output.push(item);
  }

  #finish(
    out: UnsequencedEvent[],
    reason: FinishReason,
    usage: Usage,
    message: string | undefined,
    code: string | undefined,
  ): void {
    this.#state = "ended";
    const t = this.#template;
    switch (reason) {
      case "stop": {
        this.#closeOpen(out, "completed");
        const completedAt = Math.max(this.#clock(), t.createdAt);
        this.#final = buildResponse(t, { status: "completed", output: [...this.#output], usage, completedAt });
        out.push(b.responseCompleted(this.#final));
        break;
      }
      case "length": {
        this.#closeOpen(out, "incomplete");
        this.#final = buildResponse(t, {
          status: "incomplete",
          output: [...this.#output],
          usage,
          incompleteReason: "max_output_tokens",
        });
        out.push(b.responseIncomplete(this.#final));
        break;
      }
      case "error": {
        this.#flushDelta(out);
        this.#open = null;
        this.#pendingLogprobs = null;
        const error: ResponseError = { code: "server_error", message: message || "generation failed" };
        this.#final = buildResponse(t, { status: "failed", output: [...this.#output], usage, error });
        // The response's code is the spec's enum; the `error` event's may be more precise (server_shutting_down).
        out.push(b.error(code === undefined ? error : { ...error, code }), b.responseFailed(this.#final));
        break;
      }
      case "abort": {
        this.#closeOpen(out, "incomplete");
        this.#final = buildResponse(t, { status: "cancelled", output: [...this.#output], usage });
        break;
      }
      default:
        throw new Error(`unknown finish reason ${reason satisfies never}`);
    }
  }
}

function idPrefix(kind: ItemKind): "msg" | "rs" | "fc" | "ws" | "ci" | "mcp" {
  switch (kind.type) {
    case "message":
      return "msg";
    case "reasoning":
      return "rs";
    case "function_call":
      return "fc";
    case "web_search_call":
      return "ws";
    case "code_interpreter_call":
      return "ci";
    case "mcp_call":
      return "mcp";
    default:
      throw new Error(`unknown item kind ${(kind satisfies never as { type: string }).type}`);
  }
}

/** The wire item for an open item at a moment: zero values when added, the final values when done. */
function itemOf(open: OpenItem, text: string, status: ItemStatus, logprobs: readonly Logprob[]): OutputItem {
  const id = open.ref.itemId;
  const kind = open.kind;
  switch (kind.type) {
    case "message": {
      const content = status === "in_progress" ? [] : [{
        type: "output_text" as const,
        text,
        annotations: [],
        logprobs,
      }];
      return kind.phase === undefined
        ? { id, type: "message", role: "assistant", status, content }
        : { id, type: "message", role: "assistant", status, content, phase: kind.phase };
    }
    case "reasoning":
      return {
        id,
        type: "reasoning",
        status,
        summary: [],
        content: status === "in_progress" ? [] : [{ type: "reasoning_text", text }],
      };
    case "function_call":
      return { id, type: "function_call", status, call_id: open.callId, name: kind.name, arguments: text };
    case "web_search_call":
      return {
        id,
        type: "web_search_call",
        status: status === "in_progress" ? "in_progress" : "completed",
        action: webSearchAction(kind.action, status === "in_progress" ? "" : text),
      };
    case "code_interpreter_call":
      return { id, type: "code_interpreter_call", status, container_id: open.containerId, code: text, outputs: null };
    case "mcp_call":
      return { id, type: "mcp_call", status, server_label: kind.serverLabel, name: kind.name, arguments: text };
    default:
      throw new Error(`unknown item kind ${(kind satisfies never as { type: string }).type}`);
  }
}

/** Maps a browser action and its raw JSON arguments to the wire action; unreadable arguments keep only the type. */
function webSearchAction(action: string, args: string): WebSearchAction {
  let parsed: Record<string, unknown> = {};
  if (args !== "") {
    try {
      const v: unknown = JSON.parse(args);
      if (v !== null && typeof v === "object" && !Array.isArray(v)) parsed = v as Record<string, unknown>;
    } catch {
      // Malformed arguments stay visible in nothing but the action type; the model's text is not repaired.
    }
  }
  const str = (k: string): Record<string, string> => typeof parsed[k] === "string" ? { [k]: parsed[k] } : {};
  switch (action) {
    case "open":
    case "open_page":
      return { type: "open_page", ...str("url") };
    case "find":
      return { type: "find", ...str("pattern"), ...str("url") };
    default:
      return { type: "search", ...str("query") };
  }
}

/** The emit stage as a stream: the opening events at start, then one event array per parsed chunk. */
export function emitterStage(options: EmitterOptions): TransformStream<ParsedChunk, UnsequencedEvent[]> {
  const core = new ResponseEmitter(options);
  return new TransformStream({
    start(controller) {
      controller.enqueue(core.start());
    },
    transform(chunk, controller) {
      controller.enqueue(core.push(chunk));
    },
  });
}
