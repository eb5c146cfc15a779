/**
 * Renders a compiled chat template with the globals transformers gives templates (`raise_exception`, `range`,
 * `strftime_now`, the Python spellings of the constants), `strftime_now` reading an injected clock so no rendered
 * prompt depends on the wall clock in tests.
 */
import { Environment, Interpreter, type Template } from "@huggingface/jinja";
import { strftime } from "./strftime.ts";

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
  const result = new Interpreter(env).run(template.parsed);
  return String(result.value);
}
