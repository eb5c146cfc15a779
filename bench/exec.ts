/** Runs cmd with args to completion; its stdout and stderr together, or an error naming the command on a nonzero exit. */
export async function exec(cmd: string, args: readonly string[]): Promise<string> {
  const { code, stdout, stderr } = await new Deno.Command(cmd, { args: [...args], stdout: "piped", stderr: "piped" })
    .output();
  const text = new TextDecoder().decode(stdout) + new TextDecoder().decode(stderr);
  if (code !== 0) throw new Error(`${cmd} ${args.join(" ")} failed (${code}): ${text.trim()}`);
  return text;
}
