/**
 * Test support: a real PostgreSQL server of its own in a temporary directory, on a free port of 127.0.0.1, for the
 * store conformance suite, the cross-replica end-to-end tests and the benchmark. It uses the system's PostgreSQL
 * binaries (Debian's `postgresql` package: /usr/lib/postgresql/N/bin, or initdb on the PATH). PostgreSQL refuses to
 * run as root, so under root the cluster belongs to, and runs as, the `postgres` user (else `nobody`).
 *
 * Invariants:
 * - Nothing is skipped: no binaries, or a server that does not start, is an error that fails the test.
 * - `stop()` then `start()` brings the same cluster back on the same port (the database outage tests).
 * - `close()` stops the server (immediately) and removes the directory, whatever state it is in.
 */
import postgres from "postgres";

export interface PostgresServer {
  /** `postgres://rill@127.0.0.1:PORT/` + database. */
  url(database?: string): string;
  readonly port: number;
  /** Creates an empty database and resolves with its URL. */
  createDatabase(name: string): Promise<string>;
  /** Stops the server (fast shutdown: clients are disconnected). */
  stop(): Promise<void>;
  /** Starts it again on the same port. */
  start(): Promise<void>;
  close(): Promise<void>;
}

/** Settings for tests and benchmarks: no fsync to the disk (commits stay durable against a killed client). */
const SETTINGS = ["-c", "fsync=off", "-c", "full_page_writes=off", "-c", "max_connections=200"];

function binDir(): string {
  const versions: number[] = [];
  try {
    for (const entry of Deno.readDirSync("/usr/lib/postgresql")) {
      if (/^\d+$/.test(entry.name)) versions.push(Number(entry.name));
    }
  } catch {
    // Not Debian's layout: the PATH is tried below.
  }
  versions.sort((a, b) => b - a);
  for (const version of versions) {
    const dir = `/usr/lib/postgresql/${version}/bin`;
    try {
      Deno.statSync(`${dir}/initdb`);
      return dir;
    } catch {
      // Client-only install of this version.
    }
  }
  for (const dir of (Deno.env.get("PATH") ?? "").split(":")) {
    try {
      Deno.statSync(`${dir}/initdb`);
      return dir;
    } catch {
      // Not here.
    }
  }
  throw new Error("PostgreSQL server binaries not found (install Debian's 'postgresql' package)");
}

/** The unprivileged account the server runs as when this process is root. */
function serverUser(): { name: string; uid: number; gid: number } | null {
  if (Deno.uid() !== 0) return null;
  const passwd = Deno.readTextFileSync("/etc/passwd").split("\n").map((line) => line.split(":"));
  for (const name of ["postgres", "nobody"]) {
    const entry = passwd.find((fields) => fields[0] === name);
    if (entry !== undefined) return { name, uid: Number(entry[2]), gid: Number(entry[3]) };
  }
  throw new Error("running as root and no 'postgres' or 'nobody' user to run PostgreSQL as");
}

async function run(command: string, args: string[], user: string | null): Promise<string> {
  const [program, argv] = user === null ? [command, args] : ["runuser", ["-u", user, "--", command, ...args]];
  const out = await new Deno.Command(program, { args: argv, stdout: "piped", stderr: "piped", stdin: "null" })
    .output();
  const text = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
  if (!out.success) throw new Error(`${command} ${args.join(" ")} failed (${out.code}):\n${text}`);
  return text;
}

function freePort(): number {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (listener.addr as Deno.NetAddr).port;
  listener.close();
  return port;
}

/** Whether the server accepts TCP connections yet. */
async function accepting(port: number): Promise<boolean> {
  try {
    const conn = await Deno.connect({ hostname: "127.0.0.1", port });
    conn.close();
    return true;
  } catch {
    return false;
  }
}

export async function startPostgres(): Promise<PostgresServer> {
  const bin = binDir();
  const user = serverUser();
  const dir = await Deno.makeTempDir({ prefix: "rill-pg-" });
  if (user !== null) await Deno.chown(dir, user.uid, user.gid);
  const data = `${dir}/data`;
  const log = `${dir}/server.log`;
  await run(
    `${bin}/initdb`,
    ["-D", data, "-U", "rill", "--auth=trust", "--no-locale", "-E", "UTF8", "--no-sync"],
    user?.name ?? null,
  );
  let port = 0;
  let running = false;

  const startOn = async (at: number): Promise<boolean> => {
    const options = `-p ${at} -h 127.0.0.1 -k ${dir} ${SETTINGS.join(" ")}`;
    try {
      await run(`${bin}/pg_ctl`, ["-D", data, "-l", log, "-o", options, "-w", "-t", "30", "start"], user?.name ?? null);
    } catch {
      return false;
    }
    for (let i = 0; i < 200 && !await accepting(at); i++) await new Promise((r) => setTimeout(r, 25));
    return await accepting(at);
  };
  const server: PostgresServer = {
    get port() {
      return port;
    },
    url: (database = "postgres") => `postgres://rill@127.0.0.1:${port}/${database}`,
    async createDatabase(name) {
      if (!/^[a-z_][a-z0-9_]*$/.test(name)) throw new Error(`not a plain database name: ${name}`);
      const sql = postgres(server.url(), { max: 1, onnotice: () => {} });
      try {
        await sql.unsafe(`CREATE DATABASE ${name}`);
      } finally {
        await sql.end({ timeout: 1 });
      }
      return server.url(name);
    },
    async stop() {
      if (!running) return;
      running = false;
      await run(`${bin}/pg_ctl`, ["-D", data, "-m", "fast", "-w", "stop"], user?.name ?? null);
    },
    async start() {
      if (running) return;
      if (!await startOn(port)) throw new Error(`PostgreSQL did not restart on port ${port}:\n${readLog(log)}`);
      running = true;
    },
    async close() {
      try {
        if (running) await run(`${bin}/pg_ctl`, ["-D", data, "-m", "immediate", "-w", "stop"], user?.name ?? null);
      } catch {
        // Already gone.
      } finally {
        running = false;
        await Deno.remove(dir, { recursive: true });
      }
    },
  };
  // A port found free can be taken by someone else before the server binds it: a few tries.
  for (let attempt = 0; attempt < 5 && !running; attempt++) {
    port = freePort();
    running = await startOn(port);
  }
  if (!running) {
    const text = readLog(log);
    await server.close();
    throw new Error(`PostgreSQL did not start:\n${text}`);
  }
  return server;
}

function readLog(path: string): string {
  try {
    return Deno.readTextFileSync(path).slice(-4000);
  } catch {
    return "(no server log)";
  }
}
