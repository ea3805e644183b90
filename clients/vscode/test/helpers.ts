// Test fixtures: a real memoryd (python -m memoryd from the worktree's .venv) on a temp socket
// with a temp HOME, temp git repos with instruction files, and fake socket servers for the
// misbehaving-daemon cases.
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import * as fs from "node:fs";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";

export const REPO_ROOT = path.resolve(__dirname, "..", "..", "..", "..");
export const PYTHON = process.env.MEMORYD_PYTHON ?? path.join(REPO_ROOT, ".venv", "bin", "python");
export const MEMCTL = path.join(path.dirname(PYTHON), "memctl");

const CLEARED = ["ANTHROPIC_", "MEMORYD_", "CLAUDE_", "XDG_", "GIT_", "LISTEN_"];

/**
 * A call's timeout in the tests, far above what a loaded machine takes (the client's 5 s default
 * was passed on CI's two cores): only something wrong waits for it, and fails the test then.
 */
export const CALL_TIMEOUT_MS = 60_000;

/** How long a test waits for a condition: only a test that is failing waits this long. */
export const PATIENCE_MS = 60_000;

/** A short temp dir under /tmp (socket paths are capped near 108 bytes); removed by `cleanup`. */
export function tempDir(prefix = "mdv-"): string {
  return fs.mkdtempSync(path.join("/tmp", prefix));
}

export function cleanup(dir: string): void {
  fs.rmSync(dir, { recursive: true, force: true });
}

/** An environment with HOME and XDG dirs under `root` and nothing inherited that memoryd reads. */
export function isolatedEnv(root: string, extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (!CLEARED.some((prefix) => key.startsWith(prefix))) {
      env[key] = value;
    }
  }
  const home = path.join(root, "home");
  fs.mkdirSync(home, { recursive: true });
  Object.assign(env, {
    HOME: home,
    MEMORYD_MANAGED_DIR: path.join(root, "managed"),
    XDG_STATE_HOME: path.join(root, "state"),
    XDG_DATA_HOME: path.join(root, "data"),
    XDG_CACHE_HOME: path.join(root, "cache"),
    GIT_CONFIG_NOSYSTEM: "1",
    GIT_CONFIG_GLOBAL: path.join(home, ".gitconfig"),
    ...extra,
  });
  return env;
}

export function canConnect(socketPath: string, timeoutMs = 500): Promise<boolean> {
  return new Promise((resolve) => {
    const sock = net.createConnection({ path: socketPath });
    const timer = setTimeout(() => {
      sock.destroy();
      resolve(false);
    }, timeoutMs);
    sock.once("connect", () => {
      clearTimeout(timer);
      sock.destroy();
      resolve(true);
    });
    sock.once("error", () => {
      clearTimeout(timer);
      resolve(false);
    });
  });
}

export async function waitFor(check: () => boolean | Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) {
      return;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    }
    await new Promise((r) => setTimeout(r, 25));
  }
}

export class Daemon {
  private constructor(
    readonly proc: ChildProcess,
    readonly socketPath: string,
    readonly env: NodeJS.ProcessEnv,
    private stderr: string[],
  ) {}

  /** Start memoryd on `socketPath` and wait until it accepts connections. */
  static async start(socketPath: string, env: NodeJS.ProcessEnv): Promise<Daemon> {
    const proc = spawn(PYTHON, ["-m", "memoryd", "--socket", socketPath, "--log-level", "warning"], {
      env,
      cwd: REPO_ROOT,
      stdio: ["ignore", "ignore", "pipe"],
    });
    const stderr: string[] = [];
    proc.stderr?.on("data", (chunk: Buffer) => stderr.push(chunk.toString()));
    const daemon = new Daemon(proc, socketPath, env, stderr);
    try {
      await waitFor(async () => {
        if (proc.exitCode !== null) {
          throw new Error(`memoryd exited with ${proc.exitCode}: ${stderr.join("")}`);
        }
        return canConnect(socketPath);
      }, PATIENCE_MS, "memoryd to listen"); // its imports take seconds on a loaded machine
    } catch (error) {
      proc.kill("SIGKILL");
      throw error;
    }
    return daemon;
  }

  get log(): string {
    return this.stderr.join("");
  }

  private exited(): Promise<void> {
    if (this.proc.exitCode !== null || this.proc.signalCode !== null) {
      return Promise.resolve();
    }
    return new Promise((resolve) => this.proc.once("exit", () => resolve()));
  }

  /** SIGKILL: the daemon dies mid-session, as after a crash. */
  async kill(): Promise<void> {
    this.proc.kill("SIGKILL");
    await this.exited();
  }

  async stop(): Promise<void> {
    if (this.proc.exitCode !== null || this.proc.signalCode !== null) {
      return;
    }
    this.proc.kill("SIGTERM");
    const timer = setTimeout(() => this.proc.kill("SIGKILL"), 15_000);
    await this.exited();
    clearTimeout(timer);
  }
}

/** The server's port was taken by another process between `freePort` and its bind. */
class PortTaken extends Error {}

/** A TCP port nobody listens on now (the kernel's pick for port 0). */
function freePort(): Promise<number> {
  return new Promise<number>((resolve, reject) => {
    const probe = net.createServer();
    probe.once("error", reject);
    probe.listen(0, "127.0.0.1", () => {
      const { port } = probe.address() as net.AddressInfo;
      probe.close(() => resolve(port));
    });
  });
}

/** A real memoryd-team server (SQLite in `dir`) on a free port, with one token for `repos`. */
export class TeamServer {
  private constructor(
    readonly proc: ChildProcess,
    readonly url: string,
    readonly token: string,
    private stderr: string[],
  ) {}

  static async start(dir: string, repos: string[]): Promise<TeamServer> {
    fs.mkdirSync(dir, { recursive: true });
    const database = ["--database", `sqlite:///${path.join(dir, "team.sqlite3")}`];
    const created = spawnSync(PYTHON, ["-m", "memoryd_team.cli", "token", "create", ...database, ...repos.flatMap((r) => ["--repo", r])], { cwd: REPO_ROOT, encoding: "utf8" });
    const token = created.stdout.trim().split("\n").pop() ?? "";
    if (created.status !== 0 || !token.startsWith("mdt_")) {
      throw new Error(`memoryd-team token create failed: ${created.stdout}${created.stderr}`);
    }
    // The free port is found by binding it and letting it go (`serve` takes no port 0): another
    // process (a test running beside this one) may take it in between, so a bind refused is
    // tried again on another port.
    for (let attempt = 1; ; attempt++) {
      try {
        return await TeamServer.serve(database, token, await freePort());
      } catch (error) {
        if (!(error instanceof PortTaken) || attempt === 5) {
          throw error;
        }
      }
    }
  }

  private static async serve(database: string[], token: string, port: number): Promise<TeamServer> {
    const proc = spawn(PYTHON, ["-m", "memoryd_team.cli", "serve", ...database, "--port", String(port), "--log-level", "warning"], {
      cwd: REPO_ROOT,
      stdio: ["ignore", "ignore", "pipe"],
    });
    const stderr: string[] = [];
    proc.stderr?.on("data", (chunk: Buffer) => stderr.push(chunk.toString()));
    // "close", not "exit": its stderr is all read by then, the reason it exited with it
    const closed = new Promise<void>((resolve) => proc.once("close", () => resolve()));
    const server = new TeamServer(proc, `http://127.0.0.1:${port}`, token, stderr);
    try {
      await waitFor(async () => {
        if (proc.exitCode !== null) {
          await closed;
          const log = stderr.join("");
          throw /address already in use/i.test(log) ? new PortTaken(log) : new Error(`memoryd-team exited with ${proc.exitCode}: ${log}`);
        }
        return fetch(`${server.url}/healthz`).then((r) => r.ok, () => false);
      }, PATIENCE_MS, "memoryd-team to listen");
    } catch (error) {
      proc.kill("SIGKILL");
      throw error;
    }
    return server;
  }

  get log(): string {
    return this.stderr.join("");
  }

  async stop(): Promise<void> {
    if (this.proc.exitCode !== null || this.proc.signalCode !== null) {
      return;
    }
    const exited = new Promise((resolve) => this.proc.once("exit", resolve));
    this.proc.kill("SIGTERM");
    const timer = setTimeout(() => this.proc.kill("SIGKILL"), 10_000);
    await exited;
    clearTimeout(timer);
  }
}

function git(cwd: string, ...args: string[]): void {
  const result = spawnSync("git", args, { cwd, env: { ...process.env, GIT_CONFIG_NOSYSTEM: "1" } });
  if (result.status !== 0) {
    throw new Error(`git ${args.join(" ")} failed: ${result.stderr}`);
  }
}

export interface Repo {
  root: string;
  claudeMd: string;
  style: string;
  apiRule: string;
  apiFile: string;
  readme: string;
}

/** A git repo: CLAUDE.md that @includes docs/style.md, and a rule for `src/api/**` only. */
export function makeRepo(root: string, options: { git?: boolean; apiFileName?: string; remote?: string } = {}): Repo {
  fs.mkdirSync(path.join(root, ".claude", "rules"), { recursive: true });
  fs.mkdirSync(path.join(root, "docs"), { recursive: true });
  fs.mkdirSync(path.join(root, "src", "api"), { recursive: true });
  if (options.git !== false) {
    git(root, "init", "-q");
    if (options.remote) {
      git(root, "remote", "add", "origin", options.remote);
    }
  }
  const repo: Repo = {
    root,
    claudeMd: path.join(root, "CLAUDE.md"),
    style: path.join(root, "docs", "style.md"),
    apiRule: path.join(root, ".claude", "rules", "api.md"),
    apiFile: path.join(root, "src", "api", options.apiFileName ?? "users.py"),
    readme: path.join(root, "README.md"),
  };
  fs.writeFileSync(repo.claudeMd, "# Widgets\n\nUse tabs.\n\n@docs/style.md\n");
  fs.writeFileSync(repo.style, "Keep lines under 100 characters.\n");
  fs.writeFileSync(repo.apiRule, '---\npaths:\n  - "src/api/**"\n---\nEvery API handler validates its input.\n');
  fs.writeFileSync(repo.apiFile, "def users():\n    return []\n");
  fs.writeFileSync(repo.readme, "# Widgets\n");
  return repo;
}

export interface FakeServer {
  server: net.Server;
  connections: Set<net.Socket>;
  close(): Promise<void>;
}

/** Call `each` with every line `sock` receives. */
function onLines(sock: net.Socket, each: (line: string) => void): void {
  let buffered = "";
  sock.on("data", (chunk) => {
    buffered += chunk.toString("utf8");
    let nl: number;
    while ((nl = buffered.indexOf("\n")) !== -1) {
      const line = buffered.slice(0, nl);
      buffered = buffered.slice(nl + 1);
      each(line);
    }
  });
}

/** Listen on `socketPath`; `close` ends every connection in `connections`, then the server. */
async function listening(server: net.Server, socketPath: string, connections: Set<net.Socket>): Promise<FakeServer> {
  await new Promise<void>((resolve) => server.listen(socketPath, resolve));
  return {
    server,
    connections,
    close: () =>
      new Promise<void>((resolve) => {
        for (const sock of connections) {
          sock.destroy();
        }
        server.close(() => resolve());
      }),
  };
}

/** A Unix socket server whose connections get `onLine(line, socket)` for each request line. */
export async function fakeServer(socketPath: string, onLine: (line: string, sock: net.Socket) => void): Promise<FakeServer> {
  const connections = new Set<net.Socket>();
  const server = net.createServer((sock) => {
    connections.add(sock);
    sock.on("close", () => connections.delete(sock));
    onLines(sock, (line) => onLine(line, sock));
    sock.on("error", () => undefined);
  });
  return listening(server, socketPath, connections);
}

/** A request and the daemon's reply to it, as a forwarding stand-in saw them. */
export interface Exchange {
  request: { id?: unknown; method?: string; params?: Record<string, unknown> };
  reply: { id?: unknown; result?: unknown; error?: { code: number; message: string } };
}

/**
 * A stand-in on `socketPath` that forwards each connection to the real daemon on `daemonPath`
 * and records every answered request (`exchanges`): what a client inside this process (the
 * extension's) was told, even after it stopped waiting.
 */
export async function forwardingServer(socketPath: string, daemonPath: string): Promise<FakeServer & { exchanges: Exchange[] }> {
  const exchanges: Exchange[] = [];
  const connections = new Set<net.Socket>();
  const server = net.createServer((front) => {
    const back = net.createConnection({ path: daemonPath });
    const asked = new Map<unknown, Exchange["request"]>();
    for (const sock of [front, back]) {
      connections.add(sock);
      sock.on("error", () => undefined);
      sock.on("close", () => {
        connections.delete(sock);
        front.destroy();
        back.destroy();
      });
    }
    onLines(front, (line) => {
      const request = JSON.parse(line) as Exchange["request"];
      asked.set(request.id, request);
      back.write(line + "\n");
    });
    onLines(back, (line) => {
      const reply = JSON.parse(line) as Exchange["reply"];
      const request = asked.get(reply.id);
      if (request !== undefined) {
        exchanges.push({ request, reply });
      }
      front.write(line + "\n");
    });
  });
  return { ...(await listening(server, socketPath, connections)), exchanges };
}

/** A daemon's answer to request `id` once its stop has begun (docs/protocol.md, -32006). */
export function stoppingReply(id: number): string {
  const error = { code: -32006, message: "memoryd is stopping: this request was not started; send it again once memoryd is running (memctl start)" };
  return JSON.stringify({ jsonrpc: "2.0", id, error }) + "\n";
}

/** A daemon's answer `result` to request `id`, as one line. */
export function resultReply(id: number, result: unknown): string {
  return JSON.stringify({ jsonrpc: "2.0", id, result }) + "\n";
}

export const HOME_OF = (env: NodeJS.ProcessEnv): string => env.HOME ?? os.homedir();
