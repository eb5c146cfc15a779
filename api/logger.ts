/**
 * Structured logs on stderr: `text` is one human line per entry (`2026-… info  message key=value`), `json` one JSON
 * object per line (`{"time","level","msg",...fields}`) for log collectors. Startup's "listening" line also goes to
 * stdout so scripts can wait for it.
 */
import type { LogFormat } from "./cli_options.ts";

export type LogLevel = "debug" | "info" | "warn" | "error";

export class Logger {
  readonly #format: LogFormat;
  readonly #write: (line: string) => void;

  constructor(format: LogFormat, write: (line: string) => void = (line) => console.error(line)) {
    this.#format = format;
    this.#write = write;
  }

  log(level: LogLevel, msg: string, fields: Record<string, unknown> = {}): void {
    const time = new Date().toISOString();
    if (this.#format === "json") {
      this.#write(JSON.stringify({ time, level, msg, ...fields }));
      return;
    }
    let line = `${time} ${level.padEnd(5)} ${msg}`;
    for (const [key, value] of Object.entries(fields)) {
      line += ` ${key}=${typeof value === "string" && !/\s/.test(value) ? value : JSON.stringify(value)}`;
    }
    this.#write(line);
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
