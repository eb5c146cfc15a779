/**
 * The `tools` a Response echoes: function tools in the spec's full shape (`description`, `parameters` and `strict`
 * always present, `null`/`false` when the request left them out — rill constrains no arguments unless a tool asks
 * for `strict: true`), other tools exactly as sent. The request was validated already (responses_schema.ts).
 */

export function normalizeTools(tools: readonly unknown[]): unknown[] {
  return tools.map((tool) => {
    if (typeof tool !== "object" || tool === null || (tool as { type?: unknown }).type !== "function") return tool;
    const { type, name, description, parameters, strict, ...rest } = tool as Record<string, unknown>;
    return {
      type,
      name,
      description: description ?? null,
      parameters: parameters ?? null,
      strict: strict ?? false,
      ...rest,
    };
  });
}
