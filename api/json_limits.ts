/**
 * Depth and size limits on request JSON, checked iteratively (an explicit stack, never recursion) right after the
 * body is parsed. Everything downstream that walks a request value recursively — the harmony schema renderer,
 * `JSON.stringify` of responses, stored rows and SSE events — then only ever sees bounded nesting, so no request can
 * overflow the stack (a 500) or make rendering cost grow with depth squared.
 */
import { invalidRequest } from "../prompt/errors.ts";
import { formatParam } from "./validation.ts";

/** Deepest nesting of a request body (objects and arrays). Real requests stay under 20. */
export const MAX_BODY_DEPTH = 64;
/** Deepest JSON nesting of one function tool's `parameters` schema (a `properties` level counts two). */
export const MAX_SCHEMA_DEPTH = 32;
/** Most JSON values (objects, arrays, scalars) in one function tool's `parameters` schema. */
export const MAX_SCHEMA_NODES = 10_000;

/** A value to visit; its path is rebuilt from the parent chain only when it is reported. */
interface Frame {
  readonly value: unknown;
  readonly depth: number;
  readonly parent: Frame | null;
  readonly key: PropertyKey;
}

function pathOf(frame: Frame): PropertyKey[] {
  const path: PropertyKey[] = [];
  for (let f: Frame | null = frame; f !== null && f.parent !== null; f = f.parent) path.push(f.key);
  return path.reverse();
}

/** The first place where `value` nests deeper than `maxDepth`, and how many values it holds (up to `maxNodes`+1). */
function measure(
  value: unknown,
  maxDepth: number,
  maxNodes: number,
): { tooDeep: readonly PropertyKey[] | null; nodes: number } {
  const stack: Frame[] = [{ value, depth: 0, parent: null, key: "" }];
  let nodes = 0;
  while (stack.length > 0) {
    const frame = stack.pop()!;
    const v = frame.value;
    nodes++;
    if (nodes > maxNodes) return { tooDeep: null, nodes };
    if (typeof v !== "object" || v === null) continue;
    if (frame.depth + 1 > maxDepth) return { tooDeep: pathOf(frame), nodes };
    const depth = frame.depth + 1;
    if (Array.isArray(v)) {
      for (let i = v.length - 1; i >= 0; i--) stack.push({ value: v[i], depth, parent: frame, key: i });
    } else {
      for (const key in v) stack.push({ value: (v as Record<string, unknown>)[key], depth, parent: frame, key });
    }
  }
  return { tooDeep: null, nodes };
}

/** The first few segments of a path: enough to name the parameter without echoing a 10,000-deep chain. */
function shortParam(path: readonly PropertyKey[]): string {
  return formatParam(path.slice(0, 4)) + (path.length > 4 ? "…" : "");
}

/** 400 naming the top-level parameter (and the start of the path) where the body nests too deep. */
export function checkBodyDepth(body: unknown): void {
  const { tooDeep } = measure(body, MAX_BODY_DEPTH, Number.POSITIVE_INFINITY);
  if (tooDeep === null) return;
  const param = formatParam(tooDeep.slice(0, 1));
  throw invalidRequest(
    `'${shortParam(tooDeep)}' nests JSON deeper than ${MAX_BODY_DEPTH} levels`,
    param === "" ? null : param,
    "nesting_too_deep",
  );
}

/** 400 naming `param` when a tool's parameter schema is deeper or larger than rill renders. */
export function checkToolSchema(schema: unknown, param: string): void {
  const { tooDeep, nodes } = measure(schema, MAX_SCHEMA_DEPTH, MAX_SCHEMA_NODES);
  if (tooDeep !== null) {
    throw invalidRequest(
      `The schema in '${param}' nests deeper than ${MAX_SCHEMA_DEPTH} levels`,
      param,
      "schema_too_deep",
    );
  }
  if (nodes > MAX_SCHEMA_NODES) {
    throw invalidRequest(
      `The schema in '${param}' has more than ${MAX_SCHEMA_NODES} values`,
      param,
      "schema_too_large",
    );
  }
}
