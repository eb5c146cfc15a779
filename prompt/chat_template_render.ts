/**
 * Renders a compiled chat template with the globals transformers gives templates (`raise_exception`, `range`,
 * `strftime_now`, the Python spellings of the constants), `strftime_now` reading an injected clock so no rendered
 * prompt depends on the wall clock in tests.
 *
 * Templates are written for Python's jinja2, and @huggingface/jinja follows JavaScript where they differ:
 * `s.strip(chars)` / `lstrip(chars)` / `rstrip(chars)` ignore their argument, `trim` and `split()` use JavaScript's
 * whitespace, `length` and `s[i]` count UTF-16 units, `capitalize` keeps the rest's case, and `title` starts words
 * after any non-ASCII letter and keeps their case. Qwen3's template strips reasoning with `.strip('\n')`, so a thought
 * that begins with spaces or a tab lost them. The interpreter here does these as Python does (code points, Python's
 * whitespace, jinja2's word boundaries).
 *
 * Left lenient on purpose: an attribute of an undefined value is undefined, where jinja2 raises. vLLM hands templates
 * a request's absent optional fields as None (whose attributes jinja2 reads as undefined), and rill omits them, so a
 * template reading `tool.function.parameters.properties` of a tool without parameters renders as under vLLM.
 */
import { Environment, Interpreter, type Template } from "@huggingface/jinja";
import { strftime } from "./strftime.ts";

/** Python's str.isspace() characters: what `str.strip()` without an argument removes (not U+FEFF, as JS does). */
const PYTHON_WHITESPACE = new Set(
  "\t\n\v\f\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a" +
    "\u2028\u2029\u202f\u205f\u3000",
);

/** Python's `str.strip(chars)` from the given ends; `chars` null strips whitespace. Works on code points. */
export function pythonStrip(text: string, chars: string | null, left: boolean, right: boolean): string {
  const strip = chars === null ? PYTHON_WHITESPACE : new Set(chars);
  const points = Array.from(text);
  let start = 0;
  let end = points.length;
  if (left) { while (start < end && strip.has(points[start]!)) start++; }
  if (right) { while (end > start && strip.has(points[end - 1]!)) end--; }
  return start === 0 && end === points.length ? text : points.slice(start, end).join("");
}

/** Python's `str.split()` with no separator: runs of Python whitespace separate, empty pieces are dropped. */
export function pythonSplitWhitespace(text: string): string[] {
  const words: string[] = [];
  let word = "";
  for (const ch of text) {
    if (PYTHON_WHITESPACE.has(ch)) {
      if (word !== "") words.push(word);
      word = "";
    } else {
      word += ch;
    }
  }
  if (word !== "") words.push(word);
  return words;
}

/** Python's `str.capitalize()`: the first character upper case, the rest lower case. */
export function pythonCapitalize(text: string): string {
  const [first = "", ...rest] = Array.from(text);
  return first.toUpperCase() + rest.join("").toLowerCase();
}

/**
 * jinja2's `title` filter (not `str.title()`): words begin after whitespace, `-`, `(`, `{`, `[` or `<`; each word's
 * first character is upper case and the rest lower case.
 */
export function jinjaTitle(text: string): string {
  const boundary = (ch: string) => PYTHON_WHITESPACE.has(ch) || "-({[<".includes(ch);
  let out = "";
  let atStart = true;
  for (const ch of text) {
    out += boundary(ch) ? ch : atStart ? ch.toUpperCase() : ch.toLowerCase();
    atStart = boundary(ch);
  }
  return out;
}

const STRIP_SIDES: Readonly<Record<string, readonly [boolean, boolean]>> = {
  strip: [true, true],
  lstrip: [true, false],
  rstrip: [false, true],
};

/** The parts of @huggingface/jinja's runtime values and AST the Python-string hooks read. */
interface RuntimeValue {
  readonly type: string;
  readonly value: unknown;
}
interface AstNode {
  readonly type: string;
  readonly value?: unknown;
  readonly object?: AstNode;
  readonly property?: AstNode;
  readonly computed?: boolean;
  readonly callee?: AstNode;
  readonly args?: readonly AstNode[];
}
/** The interpreter's methods the hooks wrap (private in its typings, ordinary methods at run time). */
interface InterpreterHooks {
  evaluate(node: AstNode, environment: Environment): RuntimeValue;
  evaluateCallExpression(node: AstNode, environment: Environment): RuntimeValue;
  evaluateMemberExpression(node: AstNode, environment: Environment): RuntimeValue;
  applyFilter(operand: RuntimeValue, filter: AstNode, environment: Environment): RuntimeValue;
}

/** A string value of the same class as `like` (the runtime's StringValue). */
function stringLike(like: RuntimeValue, text: string): RuntimeValue {
  return new (like.constructor as new (value: string) => RuntimeValue)(text);
}

/** The `chars` argument of a strip: absent or none means whitespace. */
function charsArgument(args: readonly RuntimeValue[], what: string): string | null {
  if (args.length > 1) throw new Error(`${what}() takes at most 1 argument (${args.length} given)`);
  const arg = args[0];
  if (arg === undefined || arg.type === "NullValue" || arg.type === "UndefinedValue") return null;
  if (arg.type !== "StringValue") throw new Error(`${what} arg must be None or str`);
  return arg.value as string;
}

/** An interpreter whose strings strip as Python's do (see the module comment). */
function pythonStringInterpreter(env: Environment): Interpreter {
  const interpreter = new Interpreter(env);
  const hooks = interpreter as unknown as InterpreterHooks;
  const evaluate = hooks.evaluate.bind(interpreter);
  const evaluateCall = hooks.evaluateCallExpression.bind(interpreter);
  const evaluateMember = hooks.evaluateMemberExpression.bind(interpreter);
  const applyFilter = hooks.applyFilter.bind(interpreter);
  hooks.evaluateCallExpression = (node, environment) => {
    const callee = node.callee;
    const name = callee?.type === "MemberExpression" && callee.computed === false &&
        callee.property?.type === "Identifier"
      ? String(callee.property.value)
      : "";
    const sides = STRIP_SIDES[name];
    if ((sides === undefined && name !== "split") || callee?.object === undefined) {
      return evaluateCall(node, environment);
    }
    // Expressions have no side effects, so evaluating the object again when deferring to the library is harmless.
    const object = evaluate(callee.object, environment);
    if (object.type !== "StringValue") return evaluateCall(node, environment);
    const args = (node.args ?? []).map((a) => evaluate(a, environment));
    const text = object.value as string;
    if (sides !== undefined) {
      return stringLike(object, pythonStrip(text, charsArgument(args, name), sides[0], sides[1]));
    }
    const separator = args[0];
    if (args.length > 1 || (separator !== undefined && separator.type !== "NullValue")) {
      return evaluateCall(node, environment);
    }
    const list = evaluateCall(node, environment); // the runtime's ArrayValue, for its class
    const words = pythonSplitWhitespace(text).map((w) => stringLike(object, w));
    return new (list.constructor as new (value: RuntimeValue[]) => RuntimeValue)(words);
  };
  hooks.evaluateMemberExpression = (node, environment) => {
    if (node.computed === true && node.object !== undefined && node.property?.type !== "SliceExpression") {
      const object = evaluate(node.object, environment);
      if (object.type === "StringValue") {
        const index = evaluate(node.property!, environment);
        if (index.type === "IntegerValue") {
          // Python indexes code points; jinja2 answers an index out of range with undefined.
          const points = Array.from(object.value as string);
          const i = index.value as number;
          const ch = points[i < 0 ? points.length + i : i];
          return ch === undefined ? evaluateMember(node, environment) : stringLike(object, ch);
        }
      }
    }
    return evaluateMember(node, environment);
  };
  hooks.applyFilter = (operand, filter, environment) => {
    const name = filter.type === "Identifier"
      ? String(filter.value)
      : filter.type === "CallExpression" && filter.callee?.type === "Identifier"
      ? String(filter.callee.value)
      : "";
    if (operand.type !== "StringValue") return applyFilter(operand, filter, environment);
    const text = operand.value as string;
    switch (name) {
      case "trim": {
        const args = (filter.args ?? []).map((a) => evaluate(a, environment));
        return stringLike(operand, pythonStrip(text, charsArgument(args, "trim"), true, true));
      }
      case "capitalize":
        return stringLike(operand, pythonCapitalize(text));
      case "title":
        return stringLike(operand, jinjaTitle(text));
      case "length":
      case "count": {
        const units = applyFilter(operand, filter, environment); // the runtime's IntegerValue, for its class
        return new (units.constructor as new (value: number) => RuntimeValue)(Array.from(text).length);
      }
      default:
        return applyFilter(operand, filter, environment);
    }
  };
  return interpreter;
}

function range(start: number, stop?: number, step = 1): number[] {
  const [from, to] = stop === undefined ? [0, start] : [start, stop];
  if (step === 0) throw new Error("range() arg 3 must not be zero");
  const out: number[] = [];
  for (let i = from; step > 0 ? i < to : i > to; i += step) out.push(i);
  return out;
}

export function renderChatTemplate(
  template: Template,
  context: Readonly<Record<string, unknown>>,
  now: () => Date,
): string {
  const env = new Environment();
  const globals: Record<string, unknown> = {
    false: false,
    true: true,
    none: null,
    False: false,
    True: true,
    None: null,
    raise_exception: (message: unknown) => {
      throw new Error(String(message));
    },
    range,
    strftime_now: (format: unknown) => strftime(String(format), now()),
  };
  for (const [name, value] of Object.entries({ ...globals, ...context })) env.set(name, value);
  const result = pythonStringInterpreter(env).run(template.parsed);
  return String(result.value);
}
