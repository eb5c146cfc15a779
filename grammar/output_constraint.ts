/**
 * What a request constrains, independent of the chat format, and where a chat format puts constrained content.
 * `buildStructuralTag` joins the two into one xgrammar structural tag: free text (reasoning) until a trigger, then the
 * tag whose content is the schema. The same mechanism serves harmony and ChatML; only the layout strings differ.
 */

/** A function tool whose arguments are constrained; `parameters` undefined means any JSON object. */
export interface ConstrainedTool {
  readonly name: string;
  readonly parameters: Record<string, unknown> | undefined;
  readonly strict: boolean;
}

/** A JSON schema to constrain to; `strict` closes objects (no properties beyond those listed). */
export interface SchemaRef {
  readonly schema: Record<string, unknown>;
  readonly strict: boolean;
}

export interface OutputConstraintSpec {
  /** The answer text must be this JSON (json_object: any JSON object). */
  readonly text?:
    | { readonly kind: "json_schema"; readonly schema: Record<string, unknown>; readonly strict: boolean }
    | { readonly kind: "json_object" };
  /** Calls to these tools get schema-valid arguments. */
  readonly tools: readonly ConstrainedTool[];
  /**
   * True when the turn must end in one of the constrained parts (text.format, tool_choice required/named): the turn's
   * end tokens are forbidden until a trigger has begun the constrained part.
   */
  readonly required: boolean;
}

/**
 * Where a chat format writes a constrained answer and a constrained call, as text around the JSON. After free
 * reasoning, `opening` starts the next part (harmony: a new assistant message; ChatML: the end of `<think>`); the
 * answer or call follows it. The triggers open the same parts where the output starts without reasoning, and
 * `callTrigger` marks a call anywhere when calls are constrained but not required.
 */
export interface ConstraintLayout {
  /** Empty when the model writes no reasoning first: the constrained part then starts the output. */
  readonly opening: string;
  /** Text between `opening` and the answer's JSON. */
  readonly answer: string;
  /** Opens an answer where no reasoning came first (harmony: the output starts with the final channel). */
  readonly answerTrigger?: string;
  /** Text between `opening` and a call's arguments. */
  call(name: string): string;
  readonly callTrigger: string;
  readonly callEnd: string;
  /** Tokens that end the assistant turn (stop tokens); forbidden in free text while the constraint is required. */
  readonly endTokens: readonly number[];
}

const ANY_OBJECT: SchemaRef = { schema: { type: "object" }, strict: false };

export interface StructuralTagPlan {
  readonly tag: Record<string, unknown>;
  readonly triggers: readonly string[];
  /** Texts that open and close the constrained parts (control tokens are allowed there and nowhere else in them). */
  readonly begins: readonly string[];
  readonly ends: readonly string[];
}

/**
 * The structural tag for `spec` in `layout`. `content` turns a schema into the tag's content format (rill passes
 * compact JSON grammars: a model left free to emit whitespace inside JSON can pad forever).
 */
export function buildStructuralTag(
  spec: OutputConstraintSpec,
  layout: ConstraintLayout,
  content: (schema: SchemaRef) => Record<string, unknown>,
): StructuralTagPlan {
  const tags: { type: "tag"; begin: string; content: Record<string, unknown>; end: string }[] = [];
  const triggers: string[] = [];
  const answer = spec.text === undefined
    ? undefined
    : content(spec.text.kind === "json_schema" ? spec.text : ANY_OBJECT);
  const calls = spec.tools.map((tool) => ({
    name: tool.name,
    content: content(tool.parameters === undefined ? ANY_OBJECT : { schema: tool.parameters, strict: tool.strict }),
  }));
  if (spec.required && layout.opening === "") {
    // No reasoning comes first: the output is the answer or a call from its first token.
    const elements: Record<string, unknown>[] = [];
    if (answer !== undefined) {
      elements.push(layout.answer === "" ? answer : { type: "tag", begin: layout.answer, content: answer, end: "" });
      tags.push({ type: "tag", begin: layout.answer, content: answer, end: "" });
    }
    for (const c of calls) {
      const tag = { type: "tag" as const, begin: layout.call(c.name), content: c.content, end: layout.callEnd };
      elements.push(tag);
      tags.push(tag);
    }
    return {
      tag: { type: "structural_tag", format: { type: "or", elements } },
      triggers: [""],
      begins: tags.map((t) => t.begin),
      ends: tags.map((t) => t.end),
    };
  }
  if (spec.required) {
    // Whatever follows the reasoning is the constrained part: the answer (when text is constrained) or a call.
    triggers.push(layout.opening);
    if (answer !== undefined) {
      tags.push({ type: "tag", begin: layout.opening + layout.answer, content: answer, end: "" });
    }
    for (const c of calls) {
      tags.push({ type: "tag", begin: layout.opening + layout.call(c.name), content: c.content, end: layout.callEnd });
    }
    if (answer !== undefined && layout.answerTrigger !== undefined && layout.answerTrigger !== layout.opening) {
      triggers.push(layout.answerTrigger);
      tags.push({ type: "tag", begin: layout.answer, content: answer, end: "" });
    }
  }
  if (calls.length > 0 && layout.callTrigger !== layout.opening) {
    triggers.push(layout.callTrigger);
    for (const c of calls) {
      tags.push({ type: "tag", begin: layout.call(c.name), content: c.content, end: layout.callEnd });
    }
  }
  return {
    tag: { type: "structural_tag", format: { type: "triggered_tags", triggers, tags, stop_after_first: true } },
    triggers,
    begins: tags.map((t) => t.begin),
    ends: tags.map((t) => t.end),
  };
}
