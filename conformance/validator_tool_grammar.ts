/**
 * Event grammars of hosted-tool items (§1.4 per-item grammars; invariants 76 mcp, 77 code interpreter, 78 web
 * search). Each grammar is a list of steps; a step matches one of its event types, once or (starred) any number of
 * times. Matching is greedy and linear, which is exact for these grammars: no two consecutive optional steps share
 * an event type.
 */

interface Step {
  readonly types: readonly string[];
  readonly repeat: boolean;
}

/** A grammar and the invariant that reports its violations. */
export interface ToolGrammar {
  readonly invariant: number;
  readonly steps: readonly Step[];
}

function once(...types: string[]): Step {
  return { types, repeat: false };
}
function many(type: string): Step {
  return { types: [type], repeat: true };
}

const GRAMMARS: Readonly<Record<string, ToolGrammar>> = {
  mcp_call: {
    invariant: 76,
    steps: [
      once("response.mcp_call.in_progress"),
      many("response.mcp_call_arguments.delta"),
      once("response.mcp_call_arguments.done"),
      once("response.mcp_call.completed", "response.mcp_call.failed"),
    ],
  },
  mcp_list_tools: {
    invariant: 76,
    steps: [
      once("response.mcp_list_tools.in_progress"),
      once("response.mcp_list_tools.completed", "response.mcp_list_tools.failed"),
    ],
  },
  code_interpreter_call: {
    invariant: 77,
    steps: [
      once("response.code_interpreter_call.in_progress"),
      many("response.code_interpreter_call_code.delta"),
      once("response.code_interpreter_call_code.done"),
      once("response.code_interpreter_call.interpreting"),
      once("response.code_interpreter_call.completed"),
    ],
  },
  web_search_call: {
    invariant: 78,
    steps: [
      once("response.web_search_call.in_progress"),
      once("response.web_search_call.searching"),
      once("response.web_search_call.completed"),
    ],
  },
};

/** The grammar for an item type, if it has one. */
export function toolGrammar(itemType: string): ToolGrammar | undefined {
  return GRAMMARS[itemType];
}

/** Position of one item inside its grammar. */
export class GrammarCursor {
  readonly grammar: ToolGrammar;
  #next = 0;
  #last = -1;

  constructor(grammar: ToolGrammar) {
    this.grammar = grammar;
  }

  /** Consumes one event; returns false (and does not move) when the event is out of order here. */
  accept(type: string): boolean {
    const steps = this.grammar.steps;
    const last = steps[this.#last];
    if (last !== undefined && last.repeat && last.types.includes(type)) return true;
    for (let j = this.#next; j < steps.length; j++) {
      const step = steps[j]!;
      if (step.types.includes(type)) {
        this.#last = j;
        this.#next = j + 1;
        return true;
      }
      if (!step.repeat) return false;
    }
    return false;
  }

  /** The event types still required before the item may close (empty when complete). */
  missing(): string[] {
    const out: string[] = [];
    for (const step of this.grammar.steps.slice(this.#next)) {
      if (!step.repeat) out.push(step.types.join("|"));
    }
    return out;
  }

  /** The event types that could come next, for messages. */
  expected(): string {
    const out: string[] = [];
    for (const step of this.grammar.steps.slice(this.#next)) {
      out.push(...step.types);
      if (!step.repeat) break;
    }
    return out.length === 0 ? "output_item.done" : out.join(" or ");
  }
}
