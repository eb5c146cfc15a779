/**
 * Turns zod failures into 400 errors that name the offending parameter, in the dotted/bracketed form OpenAI uses
 * (`input[0].content[1].type`).
 */
import type { z } from "zod";
import { ApiError, invalidRequest } from "../prompt/errors.ts";

export type Path = readonly PropertyKey[];

/** `["input", 0, "content"]` → `input[0].content`. */
export function formatParam(path: Path): string {
  let out = "";
  for (const key of path) {
    if (typeof key === "number") out += `[${key}]`;
    else out += out === "" ? String(key) : `.${String(key)}`;
  }
  return out;
}

/** Converts the first zod issue into an ApiError whose `param` is the full path of the offending field. */
export function zodToApiError(error: z.ZodError, base: Path = []): ApiError {
  const issue = error.issues[0];
  if (issue === undefined) return invalidRequest("Invalid request body", formatParam(base) || null);
  const path = [...base, ...issue.path];
  if (issue.code === "unrecognized_keys") {
    const key = issue.keys[0] ?? "";
    const param = formatParam([...path, key]);
    return invalidRequest(`Unrecognized request argument supplied: ${param}`, param, "unknown_parameter");
  }
  const param = formatParam(path);
  const where = param === "" ? "request body" : `'${param}'`;
  return invalidRequest(`Invalid value for ${where}: ${issue.message}`, param === "" ? null : param, "invalid_value");
}

/** Parses `value` with `schema`, throwing a 400 ApiError on failure. */
export function parseOrThrow<S extends z.ZodType>(schema: S, value: unknown, base: Path = []): z.output<S> {
  const result = schema.safeParse(value);
  if (!result.success) throw zodToApiError(result.error, base);
  return result.data;
}

/**
 * Query parameters of the GET/POST routes that take none in the body: anything outside `allowed` is a 400
 * `unknown_parameter` naming it (never silently ignored), and `include` / `include[]` values must be ones rill
 * honours. Stored responses and items already carry what their creating request included, so these hold trivially.
 */
export function checkQuery(url: URL, allowed: readonly string[]): void {
  for (const [key, value] of url.searchParams) {
    if (key === "include" || key === "include[]") {
      if (!allowed.includes("include")) {
        throw invalidRequest(`Unrecognized query parameter: ${key}`, key, "unknown_parameter");
      }
      if (!QUERY_INCLUDE_VALUES.has(value)) {
        throw invalidRequest(`include value '${value}' is not supported by rill`, key, "unsupported_parameter");
      }
      continue;
    }
    if (!allowed.includes(key)) throw invalidRequest(`Unrecognized query parameter: ${key}`, key, "unknown_parameter");
    if (key === "include_obfuscation" && value !== "true" && value !== "false") {
      throw invalidRequest("'include_obfuscation' must be true or false", key, "invalid_value");
    }
  }
}

const QUERY_INCLUDE_VALUES: ReadonlySet<string> = new Set([
  "message.output_text.logprobs",
  "reasoning.encrypted_content",
]);
