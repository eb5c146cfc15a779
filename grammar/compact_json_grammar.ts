/**
 * The EBNF of a JSON schema as JSON on one line with at most one space between tokens: both `{"a":1}` and
 * `{"a": 1}` styles pass (models differ), while newlines, tabs and runs of spaces, with which a small model can pad
 * forever, cannot.
 *
 * xgrammar's own bound (`maxWhitespaceCnt`) is not enough: it still allows a newline or tab in each gap, and its
 * built-in rules for values of any type (`basic_array`, `basic_object`: the whole of `json_object`, and any schema
 * part that leaves a value open) keep unbounded `[ \n\t]*` whatever the bound. So the grammar is generated with a
 * bound of one and then rewritten: every whitespace class `[ \n\t]` becomes `[ ]`, and `[ \n\t]*` becomes `[ ]?`.
 * Each gap between two tokens is exactly one such class in xgrammar's output (checked by the tests), so no gap holds
 * more than one space. The rewrite only narrows the language; a string `pattern` written with the very class
 * `[ \n\t]` narrows with it, which keeps its output valid JSON (raw newlines and tabs are not allowed in strings).
 */
import type { SchemaRef } from "./output_constraint.ts";
import { xgrammar } from "./xgrammar.ts";

/** The whitespace class of xgrammar's JSON grammars, as its EBNF prints it. */
const WHITESPACE_CLASS = "[ \\n\\t]";

/** The grammar of `ref` with at most one space between JSON tokens (see the module comment). */
export async function compactJsonGrammar(ref: SchemaRef): Promise<string> {
  const grammar = await xgrammar().Grammar.fromJSONSchema(
    JSON.stringify(ref.schema),
    true,
    -1,
    [",", ":"],
    ref.strict,
    1,
  );
  try {
    return singleSpaceWhitespace(grammar.toString());
  } finally {
    grammar.dispose();
  }
}

/**
 * `ebnf` with each whitespace class narrowed to one optional space. Quoted literals and other character classes are
 * copied as they are (a literal may spell the class's characters).
 */
export function singleSpaceWhitespace(ebnf: string): string {
  let out = "";
  let i = 0;
  while (i < ebnf.length) {
    const c = ebnf[i]!;
    if (c === '"' || c === "[") {
      const end = closing(ebnf, i, c === '"' ? '"' : "]");
      const token = ebnf.slice(i, end);
      i = end;
      if (c === "[" && token === WHITESPACE_CLASS) {
        if (ebnf[i] === "*") {
          out += "[ ]?";
          i++;
        } else {
          out += "[ ]";
        }
      } else {
        out += token;
      }
      continue;
    }
    out += c;
    i++;
  }
  return out;
}

/** The index just past the `close` that ends the literal or class opened at `start` (backslash escapes skipped). */
function closing(text: string, start: number, close: string): number {
  for (let i = start + 1; i < text.length; i++) {
    if (text[i] === "\\") i++;
    else if (text[i] === close) return i + 1;
  }
  throw new Error(`unterminated ${close === '"' ? "literal" : "character class"} in grammar at ${start}`);
}
