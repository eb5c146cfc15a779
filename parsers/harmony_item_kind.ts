/**
 * Which Responses output item a parsed harmony header becomes (harmony.md §3.1, with the fixes of §6): calls are
 * recognised on any channel; `browser.*` is web search; `python` is the code interpreter; a dotted recipient of any
 * other namespace (`repo_browser.list_files`) is an MCP call. Function calls follow the one rule rill applies to every
 * chat format: a call counts only when it names a function tool the request offered (`functions.X` or a bare `X`;
 * the name is never split on dots); a call to any other function name — `functions.get_weather` when only
 * `weather.get` was offered, or a bare `get_weather` — is not a call, and its body degrades to a plain visible message.
 * Without a recipient the channel decides, and an unknown or missing channel degrades to a plain visible message
 * rather than being dropped.
 */
import type { ItemKind } from "./segment.ts";
import type { HarmonyHeader } from "./harmony_header.ts";
import type { HostedTools } from "./hosted_tools.ts";

const FUNCTIONS_PREFIX = "functions.";

/** `hosted` undefined: every hosted call counts (parsers built without a request, as in the harmony.md fixtures). */
export function harmonyItemKind(
  header: HarmonyHeader,
  toolNames: ReadonlySet<string>,
  hosted?: HostedTools,
): ItemKind {
  const recipient = header.recipient;
  // `to=assistant` addresses the assistant itself (a tool-result header); `all` is harmony's broadcast recipient.
  if (recipient === undefined || recipient === "" || recipient === "assistant" || recipient === "all") {
    switch (header.channel) {
      case "analysis":
        return { type: "reasoning" };
      case "commentary":
        return { type: "message", phase: "commentary" };
      case "final":
        return { type: "message", phase: "final_answer" };
      default:
        return { type: "message" };
    }
  }
  if (recipient.startsWith(FUNCTIONS_PREFIX) && recipient.length > FUNCTIONS_PREFIX.length) {
    const name = recipient.slice(FUNCTIONS_PREFIX.length);
    return toolNames.has(name) ? { type: "function_call", name } : { type: "message" };
  }
  if (toolNames.has(recipient)) return { type: "function_call", name: recipient };
  if (recipient === "browser" || recipient.startsWith("browser.")) {
    if (hosted !== undefined && !hosted.webSearch) return { type: "message" };
    return { type: "web_search_call", action: recipient.slice("browser.".length) || "search" };
  }
  if (recipient === "python" || recipient.startsWith("python.")) {
    return hosted === undefined || hosted.codeInterpreter ? { type: "code_interpreter_call" } : { type: "message" };
  }
  const dot = recipient.indexOf(".");
  if (dot <= 0) return { type: "message" };
  const serverLabel = recipient.slice(0, dot);
  if (hosted !== undefined && !hosted.mcpServers.has(serverLabel)) return { type: "message" };
  return { type: "mcp_call", serverLabel, name: recipient.slice(dot + 1) || serverLabel };
}
