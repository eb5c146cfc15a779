/**
 * Structured outputs and strict tools, from the request to a per-sequence TokenConstraint:
 * - `text.format` (Responses) / `response_format` (Chat): `json_schema` constrains the answer to the schema,
 *   `json_object` to any JSON object;
 * - function tools with `strict` (default true on Responses, false on Chat) get schema-valid arguments whenever the
 *   model calls them; under tool_choice `required`, a named function or `allowed_tools` mode `required` the turn must
 *   end in a call to one of the allowed tools, and every offered tool's arguments are then JSON (strict ones: valid);
 * - reasoning before the constrained part stays free (the chat format's layout says where that part begins).
 *
 * A forced tool_choice is enforced by the grammar, not by prefilling the call's opening: the model reasons first and
 * then writes the call, which is what lets it pick the right arguments. The prompt is therefore rendered with
 * `auto` when the grammar enforces the choice.
 *
 * A schema xgrammar rejects is a 400 naming the parameter that holds it.
 */
import type { FunctionTool, ToolChoice } from "./conversation.ts";
import type { ChatFormat } from "./chat_format.ts";
import { ConstraintCompiler } from "../grammar/constraint_compiler.ts";
import type { GrammarConstraint } from "../grammar/grammar_constraint.ts";
import type { ConstrainedTool, OutputConstraintSpec } from "../grammar/output_constraint.ts";
import { GrammarError, xgrammar } from "../grammar/xgrammar.ts";
import { HfTokenizer } from "../checkpoint/hf_tokenizer.ts";
import type { Tokenizer } from "../checkpoint/tokenizer.ts";
import { invalidRequest } from "./errors.ts";

/** What a request constrains, and which request parameter holds each schema (for error messages). */
export interface StructuredRequest {
  readonly spec: OutputConstraintSpec;
  /** Parameter path of the answer schema, and of each tool's parameters by tool name. */
  readonly textParam?: string;
  readonly toolParams: ReadonlyMap<string, string>;
}

/** The parsed answer format: undefined for plain text. */
export type TextFormat =
  | { readonly kind: "json_schema"; readonly schema: Record<string, unknown>; readonly strict: boolean }
  | { readonly kind: "json_object" }
  | undefined;

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/**
 * Reads a json_schema/json_object format object. `holder` is where name/schema/strict live (Responses: the format
 * itself; Chat: its `json_schema` member) and `param` its parameter path.
 */
function readFormat(type: unknown, holder: unknown, param: string, typeParam: string): TextFormat {
  switch (type) {
    case undefined:
    case null:
    case "text":
      return undefined;
    case "json_object":
      return { kind: "json_object" };
    case "json_schema": {
      if (!isRecord(holder)) throw invalidRequest(`Missing required parameter: '${param}'`, param);
      const name = holder.name;
      if (typeof name !== "string" || !/^[A-Za-z0-9_-]{1,64}$/.test(name)) {
        throw invalidRequest(
          `'${param}.name' must be 1 to 64 letters, digits, underscores or dashes`,
          `${param}.name`,
          "invalid_value",
        );
      }
      const schema = holder.schema;
      if (!isRecord(schema)) {
        throw invalidRequest(`'${param}.schema' must be a JSON schema object`, `${param}.schema`, "invalid_type");
      }
      const strict = holder.strict;
      if (strict != null && typeof strict !== "boolean") {
        throw invalidRequest(`'${param}.strict' must be a boolean`, `${param}.strict`, "invalid_type");
      }
      return { kind: "json_schema", schema, strict: strict === true };
    }
    default:
      throw invalidRequest(`Unknown format type ${JSON.stringify(type)}`, typeParam, "invalid_value");
  }
}

/** Responses `text.format`. */
export function responsesTextFormat(format: unknown): TextFormat {
  if (format == null) return undefined;
  const type = isRecord(format) ? format.type : undefined;
  return readFormat(type, format, "text.format", "text.format.type");
}

/** Chat `response_format`. */
export function chatResponseFormat(format: unknown): TextFormat {
  if (format == null) return undefined;
  const type = isRecord(format) ? format.type : undefined;
  return readFormat(
    type,
    isRecord(format) ? format.json_schema : undefined,
    "response_format.json_schema",
    "response_format.type",
  );
}

/**
 * The constraint a request asks for, or undefined when nothing is constrained. `toolParam(name)` is the parameter
 * path of a tool's `parameters`; `strictDefault` is the API's default for a tool without `strict`.
 */
export function structuredRequest(options: {
  readonly text: TextFormat;
  readonly textParam: string;
  readonly tools: readonly FunctionTool[];
  readonly choice: ToolChoice;
  readonly strictDefault: boolean;
  readonly toolParam: (name: string) => string;
}): StructuredRequest | undefined {
  const { text, tools, choice } = options;
  const strictOf = (t: FunctionTool) => t.strict ?? options.strictDefault;
  let required = text !== undefined;
  let constrained: readonly FunctionTool[] = [];
  if (choice === "none" || tools.length === 0) {
    constrained = [];
  } else if (choice === "auto") {
    // A call the model opens is constrained only when some tool is strict; the others then get any JSON object,
    // since one trigger opens every call.
    constrained = tools.some(strictOf) ? tools : [];
  } else if (choice === "required") {
    constrained = tools;
    required = true;
  } else {
    constrained = tools.filter((t) => t.name === choice.name);
    required = true;
  }
  if (!required && constrained.length === 0) return undefined;
  const toolSpecs: ConstrainedTool[] = constrained.map((t) => ({
    name: t.name,
    parameters: strictOf(t) ? t.parameters ?? { type: "object", properties: {} } : undefined,
    strict: strictOf(t),
  }));
  return {
    spec: {
      ...(text === undefined ? {} : { text }),
      tools: toolSpecs,
      required,
    },
    ...(text === undefined ? {} : { textParam: options.textParam }),
    toolParams: new Map(constrained.map((t) => [t.name, options.toolParam(t.name)])),
  };
}

/** True when the grammar, not a prefill, enforces this choice. */
export function grammarForcesChoice(request: StructuredRequest | undefined): boolean {
  return request !== undefined && request.spec.required && request.spec.tools.length > 0;
}

/** One per served model: compiles constraints for its tokenizer (created on first use, then cached). */
export class StructuredOutputs {
  readonly #tokenizer: HfTokenizer;
  readonly #format: ChatFormat;
  #compiler: Promise<ConstraintCompiler> | undefined;

  private constructor(tokenizer: HfTokenizer, format: ChatFormat) {
    this.#tokenizer = tokenizer;
    this.#format = format;
  }

  /**
   * Structured outputs for a model, or undefined when its tokenizer is not a Hugging Face one (test doubles) or the
   * grammar engine cannot be loaded (a binary built without its package): requests then get a 400, never a 500.
   */
  static for(tokenizer: Tokenizer, format: ChatFormat): StructuredOutputs | undefined {
    if (!(tokenizer instanceof HfTokenizer)) return undefined;
    try {
      xgrammar();
    } catch {
      return undefined;
    }
    return new StructuredOutputs(tokenizer, format);
  }

  /** A fresh constraint for one generation; a 400 naming the parameter when a schema cannot be compiled. */
  async constraint(request: StructuredRequest): Promise<GrammarConstraint> {
    const tokenizer = this.#tokenizer;
    this.#compiler ??= ConstraintCompiler.create(tokenizer, tokenizer.vocabSize);
    const compiler = await this.#compiler;
    try {
      const compiled = await compiler.compile(request.spec, this.#format.constraintLayout);
      return await compiled.create();
    } catch (error) {
      if (!(error instanceof GrammarError)) throw error;
      throw await this.#blame(compiler, request, error);
    }
  }

  /** Finds which schema xgrammar rejected, so the 400 names its parameter. */
  async #blame(compiler: ConstraintCompiler, request: StructuredRequest, error: GrammarError): Promise<Error> {
    const { text, tools } = request.spec;
    const candidates: [string, Record<string, unknown>, boolean][] = [];
    if (text?.kind === "json_schema") candidates.push([`${request.textParam}.schema`, text.schema, text.strict]);
    for (const t of tools) {
      if (t.parameters !== undefined) {
        candidates.push([`${request.toolParams.get(t.name) ?? "tools"}`, t.parameters, t.strict]);
      }
    }
    for (const [param, schema, strict] of candidates) {
      const reason = await compiler.checkSchema({ schema, strict });
      if (reason !== undefined) {
        return invalidRequest(`Invalid schema for '${param}': ${reason}`, param, "invalid_value");
      }
    }
    return invalidRequest(
      `The output grammar could not be compiled: ${error.message}`,
      request.textParam ?? "tools",
      "invalid_value",
    );
  }
}
