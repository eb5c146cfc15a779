/** The connection front's counters in the Prometheus text format, appended to `/metrics`. */
import type { GateStats } from "./connection_gate.ts";

export function connectionMetrics(s: GateStats): string {
  return [
    "# HELP rill_connections_open Client connections open now.",
    "# TYPE rill_connections_open gauge",
    `rill_connections_open ${s.open}`,
    "# HELP rill_connections_refused_total Connections answered 503 because the connection limit was reached.",
    "# TYPE rill_connections_refused_total counter",
    `rill_connections_refused_total ${s.refused}`,
    "# HELP rill_connections_timed_out_total Connections closed by a header, body or idle timeout.",
    "# TYPE rill_connections_timed_out_total counter",
    `rill_connections_timed_out_total ${s.timedOut}`,
    "# HELP rill_connections_bad_framing_total Connections closed with a 400 for malformed HTTP framing.",
    "# TYPE rill_connections_bad_framing_total counter",
    `rill_connections_bad_framing_total ${s.badFraming}`,
    "# HELP rill_accept_errors_total Failed accepts (e.g. out of file descriptors), each retried.",
    "# TYPE rill_accept_errors_total counter",
    `rill_accept_errors_total ${s.acceptErrors}`,
    "",
  ].join("\n");
}
