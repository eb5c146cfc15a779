/**
 * Every identifier rill mints (responses, items, calls, chat completions) comes from here. Ids carry the OpenAI type prefixes clients dispatch on (`msg_`, `rs_`, `fc_`…)
 * and, by default, 128 random bits so they are unique across responses and processes.
 */

export type IdPrefix =
  | "resp"
  | "msg"
  | "rs"
  | "fc"
  | "fco"
  | "call"
  | "ws"
  | "ci"
  | "cntr"
  | "mcp"
  | "cmp"
  | "chatcmpl"
  | "cmpl"
  | "conv";

/** Mints identifiers. The emitter calls it once per item, at `output_item.added`, and never re-mints. */
export interface IdSource {
  next(prefix: IdPrefix): string;
}

const HEX: readonly string[] = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, "0"));

/** `prefix_` + 32 hex characters from the platform CSPRNG (`chatcmpl-…`: OpenAI's chat ids use a hyphen). */
export const randomIds: IdSource = {
  next(prefix) {
    const bytes = crypto.getRandomValues(new Uint8Array(16));
    let s = prefix + (prefix === "chatcmpl" ? "-" : "_");
    for (const b of bytes) s += HEX[b]!;
    return s;
  },
};

/** Deterministic ids for tests: `msg_0001`, `rs_0002`… numbered in minting order across all prefixes. */
export class CounterIds implements IdSource {
  #n = 0;
  next(prefix: IdPrefix): string {
    this.#n++;
    return `${prefix}_${String(this.#n).padStart(4, "0")}`;
  }
}
