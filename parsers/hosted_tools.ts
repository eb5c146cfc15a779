/**
 * The hosted tool types a request declared. rill runs no hosted tool and never offers one to the model, but it echoes
 * them, and a harmony call to `browser.*`, `python` or `server.tool` becomes a web search, code interpreter or MCP call
 * item only when the request declared that kind of tool (an MCP call: a tool of that `server_label`): the one rule
 * for calls in every format, that a call counts only when the request named its tool. Any other such call degrades
 * to a plain visible message.
 */
export interface HostedTools {
  readonly webSearch: boolean;
  readonly codeInterpreter: boolean;
  readonly mcpServers: ReadonlySet<string>;
}

export const NO_HOSTED_TOOLS: HostedTools = { webSearch: false, codeInterpreter: false, mcpServers: new Set() };

/** The hosted tools among a request's `tools` (entries that are not objects with a string `type` are ignored). */
export function declaredHostedTools(tools: readonly unknown[]): HostedTools {
  let webSearch = false;
  let codeInterpreter = false;
  const mcpServers = new Set<string>();
  for (const tool of tools) {
    if (typeof tool !== "object" || tool === null) continue;
    const { type, server_label: label } = tool as { type?: unknown; server_label?: unknown };
    if (typeof type !== "string") continue;
    if (type.startsWith("web_search")) webSearch = true;
    else if (type === "code_interpreter") codeInterpreter = true;
    else if (type === "mcp" && typeof label === "string") mcpServers.add(label);
  }
  return { webSearch, codeInterpreter, mcpServers };
}
