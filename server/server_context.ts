/**
 * What every request of one server reads: its options, resources, front-door policies (auth, CORS, body limit) and
 * the state shutdown changes. Built once by `createServer`; the per-request code (request_handler.ts,
 * route_handlers.ts, responses_upgrade.ts) takes it as its one argument beside the request.
 */
import { Metrics } from "../api/metrics.ts";
import type { ResponsesSocket } from "../api/responses/responses_socket.ts";
import { OPENAI_DEFAULTS } from "../api/sampling_defaults.ts";
import { type ApiServices, createApiServices } from "./api_services.ts";
import { ApiKeyCheck } from "./auth.ts";
import type { GateStats } from "./connection_gate.ts";
import { Cors } from "./cors.ts";
import { DEFAULT_MAX_BODY_BYTES } from "./http_body.ts";
import type { ServerOptions } from "./server_options.ts";

/** The one served model as `/v1/models` lists it. */
export interface ModelCard {
  readonly id: string;
  readonly object: "model";
  readonly created: number;
  readonly owned_by: "rill";
  readonly max_model_len: number;
}

export interface ServerContext {
  readonly options: ServerOptions;
  readonly services: ApiServices;
  readonly metrics: Metrics;
  readonly model: ModelCard;
  readonly maxBody: number;
  readonly auth: ApiKeyCheck | null;
  readonly cors: Cors;
  /** Routes answered without the API key. */
  readonly publicRoutes: ReadonlySet<string>;
  /** The connection front's counters; the front exists once the server listens, before any request arrives. */
  readonly connections: () => GateStats;
  /** Set once shutdown starts: new requests get 503 and `/health` reports `draining`. */
  draining: boolean;
  /** Open WebSocket-mode connections, closed at shutdown once their responses ended. */
  readonly sockets: Set<ResponsesSocket>;
}

export function createServerContext(options: ServerOptions, connections: () => GateStats): ServerContext {
  const metrics = new Metrics();
  return {
    options,
    services: createApiServices(options, metrics, options.defaults ?? OPENAI_DEFAULTS),
    metrics,
    model: {
      id: options.modelId,
      object: "model",
      created: options.createdAt ?? Math.floor(Date.now() / 1000),
      owned_by: "rill",
      max_model_len: options.engine.maxModelLen,
    },
    maxBody: options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES,
    auth: options.apiKey === undefined || options.apiKey === "" ? null : new ApiKeyCheck(options.apiKey),
    cors: new Cors(options.allowedOrigins ?? []),
    publicRoutes: new Set(options.metricsPublic === true ? ["/health", "/metrics"] : ["/health"]),
    connections,
    draining: false,
    sockets: new Set(),
  };
}
