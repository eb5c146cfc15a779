/**
 * `POST /tokenize` and `POST /detokenize` as vLLM serves them.
 *
 * - tokenize: `{model?, prompt, add_special_tokens?, return_token_strs?}` or `{model?, messages, tools?,
 *   add_special_tokens?, return_token_strs?}` → `{count, max_model_len, tokens, token_strs?}`. A prompt is encoded
 *   as the model's raw input (special-token text becomes the special token), exactly as `/v1/completions` encodes it;
 *   messages are rendered by the model's chat format as `/v1/chat/completions` renders them (generation prompt
 *   included). `add_special_tokens` (vLLM's defaults: true for a prompt, false for messages, whose template writes
 *   its own BOS) puts the tokenizer post-processor's specials around the ids, as HF's tokenizers do (Llama 3's BOS;
 *   none for Qwen or gpt-oss).
 * - detokenize: `{model?, tokens}` → `{prompt}` (special tokens included as their text).
 * Bad input is a 400 naming the parameter; a `model` other than the served one is a 404.
 */
import { z } from "zod";
import type { ChatFormat } from "../prompt/chat_format.ts";
import type { Tokenizer } from "../checkpoint/tokenizer.ts";
import { ChatCompletionSchema, chatMessages, chatTools } from "./chat/chat_schema.ts";
import { invalidRequest, modelNotFound } from "../prompt/errors.ts";
import { jsonResponse } from "./http_response.ts";
import { parseOrThrow } from "./validation.ts";

const nullish = <T extends z.ZodType>(schema: T) => schema.nullable().optional();

const TokenizeSchema = z.strictObject({
  model: nullish(z.string()),
  prompt: z.string().optional(),
  messages: z.array(z.unknown()).optional(),
  tools: nullish(z.array(z.unknown())),
  add_special_tokens: nullish(z.boolean()),
  add_generation_prompt: nullish(z.literal(true)),
  return_token_strs: nullish(z.boolean()),
});

const DetokenizeSchema = z.strictObject({
  model: nullish(z.string()),
  tokens: z.array(z.number().int().min(0)),
});

export interface TokenizeOptions {
  readonly tokenizer: Tokenizer;
  readonly format: ChatFormat;
  readonly modelId: string;
  readonly maxModelLen: number;
}

export class TokenizeService {
  readonly #o: TokenizeOptions;

  constructor(options: TokenizeOptions) {
    this.#o = options;
  }

  tokenize(raw: Record<string, unknown>): Response {
    const body = parseOrThrow(TokenizeSchema, raw);
    const { tokenizer, format, modelId, maxModelLen } = this.#o;
    if (body.model != null && body.model !== modelId) throw modelNotFound(body.model, modelId);
    let tokens: number[];
    const withSpecials = (ids: number[], byDefault: boolean): number[] =>
      (body.add_special_tokens ?? byDefault) && tokenizer.withSpecialTokens !== undefined
        ? tokenizer.withSpecialTokens(ids)
        : ids;
    if (body.prompt !== undefined) {
      if (body.messages !== undefined) {
        throw invalidRequest("Give either 'prompt' or 'messages', not both", "messages", "invalid_value");
      }
      if (body.tools != null) throw invalidRequest("'tools' goes with 'messages'", "tools", "invalid_value");
      tokens = withSpecials(tokenizer.encode(body.prompt), true);
    } else if (body.messages !== undefined) {
      // The Chat Completions schema and conversion, so `messages` means here what it means there.
      const chat = parseOrThrow(ChatCompletionSchema, {
        model: modelId,
        messages: body.messages,
        ...(body.tools == null ? {} : { tools: body.tools }),
      });
      const { tools, choice } = chatTools(chat);
      tokens = withSpecials(format.render({ messages: chatMessages(chat), tools, toolChoice: choice }), false);
    } else {
      throw invalidRequest(
        "Missing required parameter: 'prompt' (or 'messages')",
        "prompt",
        "missing_required_parameter",
      );
    }
    return jsonResponse({
      count: tokens.length,
      max_model_len: maxModelLen,
      tokens,
      ...(body.return_token_strs === true ? { token_strs: tokens.map((id) => tokenizer.decode([id])) } : {}),
    });
  }

  detokenize(raw: Record<string, unknown>): Response {
    const body = parseOrThrow(DetokenizeSchema, raw);
    const { tokenizer, modelId } = this.#o;
    if (body.model != null && body.model !== modelId) throw modelNotFound(body.model, modelId);
    const bad = body.tokens.findIndex((id) => id >= tokenizer.vocabSize);
    if (bad >= 0) {
      throw invalidRequest(
        `Token id ${body.tokens[bad]} is out of the vocabulary (size ${tokenizer.vocabSize})`,
        `tokens[${bad}]`,
        "invalid_value",
      );
    }
    return jsonResponse({ prompt: tokenizer.decode(body.tokens) });
  }
}
