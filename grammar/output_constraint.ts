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
 * `callTriggers` mark a call anywhere when calls are constrained but not required.
 */
export interface ConstraintLayout {
  /** Empty when the model writes no reasoning first: the constrained part then starts the output. */
  readonly opening: string;
  /** Text between `opening` and the answer's JSON. */
  readonly answer: string;
  /** Opens an answer where no reasoning came first (harmony: the output starts with the final channel). */
  readonly answerTrigger?: string;
  /**
   * The ways a call to `name` is written between `opening` and its arguments (harmony puts the recipient before or
   * after the channel); each contains one of `callTriggers`, from which a call opened anywhere is recognised.
   */
  calls(name: string): readonly string[];
  readonly callTriggers: readonly string[];
  /**
   * The end token (its text) that must close an answer / a call, where the format has one per kind (harmony:
   * `<|return|>`, `<|call|>`); otherwise any of `endTokens` does.
   */
  readonly answerStop?: string;
  readonly callStop?: string;
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
  /** Per tag (same order as `begins`), the text of the end token that must close it, if the format has one. */
  readonly stops: readonly (string | undefined)[];
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
  /** Parallel to `tags`: which kind each is. */
  const kinds: ("answer" | "call")[] = [];
  const add = (kind: "answer" | "call", tag: (typeof tags)[number]) => {
    tags.push(tag);
    kinds.push(kind);
  };
  const triggers: string[] = [];
  const answer = spec.text === undefined
    ? undefined
    : content(spec.text.kind === "json_schema" ? spec.text : ANY_OBJECT);
  const calls = spec.tools.flatMap((tool) => {
    const args = content(tool.parameters === undefined ? ANY_OBJECT : { schema: tool.parameters, strict: tool.strict });
    return layout.calls(tool.name).map((begin) => ({ begin, content: args }));
  });
  if (spec.required && layout.opening === "") {
    // No reasoning comes first: the output is the answer or a call from its first token.
    const elements: Record<string, unknown>[] = [];
    if (answer !== undefined) {
      elements.push(
        layout.answer === "" ? answer : { type: "tag", begin: layout.answer, content: answer, end: "" },
      );
      add("answer", { type: "tag", begin: layout.answer, content: answer, end: "" });
    }
    for (const c of calls) {
      const tag = { type: "tag" as const, begin: c.begin, content: c.content, end: layout.callEnd };
      elements.push(tag);
      add("call", tag);
    }
    return {
      tag: { type: "structural_tag", format: { type: "or", elements } },
      triggers: [""],
      begins: tags.map((t) => t.begin),
      ends: tags.map((t) => t.end),
      stops: kinds.map((k) => k === "answer" ? layout.answerStop : layout.callStop),
    };
  }
  if (spec.required) {
    // Whatever follows the reasoning is the constrained part: the answer (when text is constrained) or a call.
    triggers.push(layout.opening);
    if (answer !== undefined) {
      add("answer", { type: "tag", begin: layout.opening + layout.answer, content: answer, end: "" });
    }
    for (const c of calls) {
      add("call", { type: "tag", begin: layout.opening + c.begin, content: c.content, end: layout.callEnd });
    }
    if (answer !== undefined && layout.answerTrigger !== undefined && layout.answerTrigger !== layout.opening) {
      triggers.push(layout.answerTrigger);
      add("answer", { type: "tag", begin: layout.answer, content: answer, end: "" });
    }
  }
  if (calls.length > 0) {
    // A call opened anywhere: each form from its trigger on (what precedes the trigger is free text). Triggers must
    // not overlap, or xgrammar would pick one and refuse the other's forms.
    triggers.push(...layout.callTriggers);
    const seen = new Set<string>();
    for (const c of calls) {
      const trigger = layout.callTriggers.find((t) => c.begin.includes(t));
      if (trigger === undefined) continue;
      const begin = c.begin.slice(c.begin.indexOf(trigger));
      if (seen.has(begin)) continue;
      seen.add(begin);
      add("call", { type: "tag", begin, content: c.content, end: layout.callEnd });
    }
  }
  return {
    tag: { type: "structural_tag", format: { type: "triggered_tags", triggers, tags, stop_after_first: true } },
    triggers,
    begins: tags.map((t) => t.begin),
    ends: tags.map((t) => t.end),
    stops: kinds.map((k) => k === "answer" ? layout.answerStop : layout.callStop),
  };
}
