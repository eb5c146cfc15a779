/**
 * What a request constrains, independent of the chat format, and where a chat format puts constrained content.
 * `buildStructuralTag` joins the two into one xgrammar structural tag: free text (reasoning) until a trigger, then the
 * tag whose content is the schema. The same mechanism serves harmony and ChatML; only the layout strings differ.
 */

/** A function tool whose arguments are constrained; `parameters` undefined means any JSON object. */
export interface ConstrainedTool {
  readonly name: string;
  readonly parameters: Record<string, unknown> | undefined;
}

export interface OutputConstraintSpec {
  /** The answer text must be this JSON (json_object: any JSON object). */
  readonly text?:
    | { readonly kind: "json_schema"; readonly schema: Record<string, unknown> }
    | { readonly kind: "json_object" };
  /** Calls to these tools get schema-valid arguments. */
  readonly tools: readonly ConstrainedTool[];
  /**
   * True when the turn must end in one of the constrained parts (text.format, tool_choice required/named): the turn's
   * end tokens are forbidden until a trigger has begun the constrained part.
   */
  readonly required: boolean;
}

/** Where a chat format writes an answer and a tool call, as text around the constrained JSON. */
export interface ConstraintLayout {
  readonly text: { readonly trigger: string; readonly begin: string; readonly end: string };
  readonly toolTrigger: string;
  toolBegin(name: string): string;
  readonly toolEnd: string;
  /**
   * Where the answer and a call both start after the same text (ChatML: after `</think>\n\n`), the answer tag's begin
   * is that text and a constrained answer's trigger must also open calls: tool tags then begin with it too.
   */
  readonly sharedOpening?: string;
  /** Texts that end the assistant turn (stop tokens); forbidden in free text while the constraint is required. */
  readonly endTokens: readonly number[];
}

const ANY_OBJECT = { type: "object" } as const;

/** The structural tag for `spec` in `layout`, and the triggers whose appearance begins the constrained part. */
export function buildStructuralTag(
  spec: OutputConstraintSpec,
  layout: ConstraintLayout,
): { readonly tag: Record<string, unknown>; readonly triggers: readonly string[] } {
  const tags: Record<string, unknown>[] = [];
  const triggers: string[] = [];
  if (spec.text !== undefined) {
    const schema = spec.text.kind === "json_schema" ? spec.text.schema : ANY_OBJECT;
    tags.push({
      type: "tag",
      begin: layout.text.begin,
      content: { type: "json_schema", json_schema: schema },
      end: layout.text.end,
    });
    triggers.push(layout.text.trigger);
  }
  const shared = spec.text !== undefined ? layout.sharedOpening : undefined;
  for (const tool of spec.tools) {
    tags.push({
      type: "tag",
      begin: (shared ?? "") + layout.toolBegin(tool.name),
      content: { type: "json_schema", json_schema: tool.parameters ?? ANY_OBJECT },
      end: layout.toolEnd,
    });
  }
  if (spec.tools.length > 0 && shared === undefined) triggers.push(layout.toolTrigger);
  return {
    tag: { type: "structural_tag", format: { type: "triggered_tags", triggers, tags, stop_after_first: true } },
    triggers,
  };
}
