/**
 * Structured logs on stderr: `text` is one human line per entry (`2026-… info  message key=value`), `json` one JSON
 * object per line (`{"time","level","msg",...fields}`) for log collectors. Startup's "listening" line also goes to
 * stdout so scripts can wait for it.
 */
import type { LogFormat } from "./cli_options.ts";

export type LogLevel = "debug" | "info" | "warn" | "error";

const RANK: Readonly<Record<LogLevel, number>> = { debug: 0, info: 1, warn: 2, error: 3 };

const utf8 = new TextEncoder();

/**
 * One line to stderr with blocking writes: a log line per request must stay cheap under load, and `console.error`
 * formats its argument first (several times the cost of this write). A stderr that cannot be written (closed pipe)
 * drops the line: logging never fails a request.
 */
function writeStderr(line: string): void {
  const bytes = utf8.encode(line + "\n");
  try {
    for (let at = 0; at < bytes.length;) {
      const n = Deno.stderr.writeSync(bytes.subarray(at));
      if (n <= 0) return;
      at += n;
    }
  } catch {
    // Nowhere left to report it.
  }
}

export class Logger {
  readonly #format: LogFormat;
  readonly #write: (line: string) => void;
  readonly #min: number;

  /** Entries below `level` are dropped (debug: health probes and other per-probe noise). */
  constructor(format: LogFormat, write: (line: string) => void = writeStderr, level: LogLevel = "info") {
    this.#format = format;
    this.#write = write;
    this.#min = RANK[level];
  }

  get format(): LogFormat {
    return this.#format;
  }

  /** The line `log` would write (also for stdout lines that must follow the format). */
  line(level: LogLevel, msg: string, fields: Record<string, unknown> = {}): string {
    const time = new Date().toISOString();
    if (this.#format === "json") return JSON.stringify({ time, level, msg, ...fields });
    let line = `${time} ${level.padEnd(5)} ${msg}`;
    for (const [key, value] of Object.entries(fields)) {
      line += ` ${key}=${typeof value === "string" && !/\s/.test(value) ? value : JSON.stringify(value)}`;
    }
    return line;
  }

  log(level: LogLevel, msg: string, fields: Record<string, unknown> = {}): void {
    if (RANK[level] < this.#min) return;
    this.#write(this.line(level, msg, fields));
  }

  debug(msg: string, fields?: Record<string, unknown>): void {
    this.log("debug", msg, fields);
  }
  info(msg: string, fields?: Record<string, unknown>): void {
    this.log("info", msg, fields);
  }
  warn(msg: string, fields?: Record<string, unknown>): void {
    this.log("warn", msg, fields);
  }
  error(msg: string, fields?: Record<string, unknown>): void {
    this.log("error", msg, fields);
  }
}
