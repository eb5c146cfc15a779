/**
 * The layout rule of rill's structured outputs, as tests check it: outside JSON strings there is no newline, tab or
 * carriage return, and no run of more than one space. Returns the first breach (its offset and what it is), or
 * undefined when the text keeps the rule. Only the layout is checked: whether the text parses is the caller's test.
 */
export function whitespaceBreach(text: string): string | undefined {
  let inString = false;
  let run = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (inString) {
      if (c === "\\") i++;
      else if (c === '"') inString = false;
      continue;
    }
    if (c === '"') inString = true;
    if (c === "\n" || c === "\t" || c === "\r") return `${JSON.stringify(c)} at ${i}`;
    run = c === " " ? run + 1 : 0;
    if (run > 1) return `${run} spaces at ${i - run + 1}`;
  }
  return undefined;
}
