/** The API resources one server answers with, built once from its options and sharing its metrics and defaults. */
import { ChatCompletionsService } from "../api/chat/chat_completions.ts";
import { CompletionsService } from "../api/chat/completions.ts";
import { ConversationsService } from "../api/conversations/conversations_service.ts";
import type { Metrics } from "../api/metrics.ts";
import { ReasoningSeal } from "../api/responses/reasoning_seal.ts";
import { ResponsesService } from "../api/responses/responses_service.ts";
import type { SamplingDefaults } from "../api/sampling_defaults.ts";
import { TokenizeService } from "../api/tokenize.ts";
import { randomIds } from "../events/ids.ts";
import { StructuredOutputs } from "../prompt/structured_output.ts";
import type { ServerOptions } from "./server_options.ts";

export interface ApiServices {
  readonly responses: ResponsesService;
  readonly conversations: ConversationsService;
  readonly chat: ChatCompletionsService;
  readonly completions: CompletionsService;
  readonly tokenize: TokenizeService;
}

export function createApiServices(options: ServerOptions, metrics: Metrics, defaults: SamplingDefaults): ApiServices {
  const structuredOutputs = StructuredOutputs.for(options.engine.tokenizer, options.format);
  const structured = structuredOutputs === undefined ? {} : { structuredOutputs };
  const generating = { engine: options.engine, format: options.format, modelId: options.modelId, metrics, defaults };
  return {
    responses: new ResponsesService({
      ...structured,
      ...generating,
      store: options.store,
      seal: new ReasoningSeal(options.reasoningKey ?? crypto.getRandomValues(new Uint8Array(32)), options.modelId),
      ...(options.ids === undefined ? {} : { ids: options.ids }),
      ...(options.onError === undefined ? {} : { onError: options.onError }),
    }),
    conversations: new ConversationsService({
      store: options.store,
      newId: (prefix) => randomIds.next(prefix),
      now: () => Math.floor(Date.now() / 1000),
    }),
    chat: new ChatCompletionsService({ ...structured, ...generating }),
    completions: new CompletionsService(generating),
    tokenize: new TokenizeService({
      tokenizer: options.engine.tokenizer,
      format: options.format,
      modelId: options.modelId,
      maxModelLen: options.engine.maxModelLen,
    }),
  };
}

/** Generations in flight across the resources that generate. */
export function activeGenerations(services: ApiServices): number {
  return services.responses.active + services.chat.active + services.completions.active;
}

/** Aborts every generation in flight; each ends within one engine step, with an ending its client can tell apart. */
export function abortGenerations(services: ApiServices): void {
  services.responses.abortAll();
  services.chat.abortAll();
  services.completions.abortAll();
}
