// The socket path rule every memoryd client shares (clients/memoryd_client/client.py,
// default_socket_path): $MEMORYD_SOCKET; else on macOS ~/Library/Caches/memoryd/memoryd.sock;
// else $XDG_RUNTIME_DIR/memoryd/memoryd.sock when it is a runtime folder of the user's (absolute,
// existing, the user's own, no group/other bits; else passed over with a warning), else
// $XDG_CACHE_HOME/memoryd/memoryd.sock (when absolute), else <tempdir>/memoryd-<uid>/memoryd.sock.
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";

export type Env = Readonly<Record<string, string | undefined>>;

/**
 * Python's tempfile.gettempdir(): the first writable directory of $TMPDIR, $TEMP, $TMP, /tmp,
 * /var/tmp, /usr/tmp, else the current directory.
 */
export function pythonTempDir(env: Env): string {
  const named = ["TMPDIR", "TEMP", "TMP"].map((name) => env[name]).filter((v): v is string => !!v);
  for (const candidate of [...named, "/tmp", "/var/tmp", "/usr/tmp"]) {
    const dir = path.resolve(candidate);
    if (isWritableDir(dir)) {
      return dir;
    }
  }
  return process.cwd();
}

function isWritableDir(dir: string): boolean {
  try {
    fs.accessSync(dir, fs.constants.W_OK | fs.constants.X_OK);
    return fs.statSync(dir).isDirectory();
  } catch {
    return false;
  }
}

/**
 * Why $XDG_RUNTIME_DIR (`value`) is no runtime folder of the user's, undefined when it is one: the
 * XDG spec has it absolute, the user's own and open to nobody else. memoryd_client.paths has the
 * same checks, so every client passes the same folders over.
 */
export function runtimeDirProblem(value: string, uid: number = currentUid()): string | undefined {
  if (!path.isAbsolute(value)) {
    return "it is not an absolute path";
  }
  let info: fs.Stats;
  try {
    info = fs.statSync(value);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "ENOENT") {
      return "it does not exist (the login session that made it ended, or `su` without a login)";
    }
    return `it cannot be read (${code ?? String(err)})`;
  }
  if (!info.isDirectory()) {
    return "it is not a folder";
  }
  if (info.uid !== uid) {
    return `it belongs to uid ${info.uid}, not to you (uid ${uid})`;
  }
  const mode = info.mode & 0o7777;
  if (mode & 0o077) {
    return `its mode is ${mode.toString(8).padStart(4, "0")}, open to others (a runtime folder is 0700)`;
  }
  return undefined;
}

/** Called with the warning when $XDG_RUNTIME_DIR is passed over; each text once a session. */
export type Warn = (message: string) => void;
const warned = new Set<string>();

export function defaultSocketPath(
  env: Env = process.env,
  uid: number = currentUid(),
  platform: string = process.platform,
  warn?: Warn,
): string {
  const configured = env.MEMORYD_SOCKET;
  if (configured) {
    // As the Python client: a leading ~ is the home folder (the variable is often set where no
    // shell expands it), a relative path is taken from the working directory, and the path is
    // spelled as pathlib spells it (it was used as given: "~/m.sock" was looked for literally).
    const expanded = expandHome(configured, env);
    return pathlibNormalize(path.isAbsolute(expanded) ? expanded : `${process.cwd()}/${expanded}`);
  }
  if (platform === "darwin") {
    return pathlibNormalize(`${homeDir(env)}/Library/Caches/memoryd/memoryd.sock`);
  }
  const runtime = env.XDG_RUNTIME_DIR;
  const problem = runtime ? runtimeDirProblem(runtime, uid) : undefined;
  if (runtime && problem === undefined) {
    return pathlibNormalize(`${runtime}/memoryd/memoryd.sock`);
  }
  // An XDG base directory counts only when absolute (the XDG spec ignores a relative one).
  const cache = env.XDG_CACHE_HOME;
  const sock =
    cache && path.isAbsolute(cache)
      ? pathlibNormalize(`${cache}/memoryd/memoryd.sock`)
      : path.join(pythonTempDir(env), `memoryd-${uid}`, "memoryd.sock");
  if (problem !== undefined && warn) {
    const message = `XDG_RUNTIME_DIR=${runtime} is passed over: ${problem}; the socket is ${sock}`;
    if (!warned.has(message)) {
      warned.add(message);
      warn(message);
    }
  }
  return sock;
}

/** A leading ~ as the home folder, as the Python client reads it (the socket and memctlPath settings). */
export function expandHome(p: string, env: Env): string {
  return p === "~" || p.startsWith("~/") ? homeDir(env) + p.slice(1) : p;
}

/** memoryd_client.paths.home(): $HOME when absolute, else the password database's home (os.homedir() takes a relative $HOME). */
function homeDir(env: Env): string {
  const value = env.HOME;
  if (value && path.isAbsolute(value)) {
    return value;
  }
  try {
    return os.userInfo().homedir;
  } catch {
    return os.homedir();
  }
}

/**
 * Python's pathlib spelling of a POSIX path: repeated slashes and "." parts collapse, no trailing
 * slash, ".." kept (pathlib never resolves it, path.normalize does); exactly two leading slashes stay.
 */
export function pathlibNormalize(p: string): string {
  const double = p.startsWith("//") && !p.startsWith("///");
  const parts = p.split("/").filter((part) => part !== "" && part !== ".");
  const body = parts.join("/");
  if (double) {
    return `//${body}`;
  }
  if (p.startsWith("/")) {
    return `/${body}`;
  }
  return body === "" ? "." : body;
}

/** The socket to use: the `memoryd.socketPath` setting when set, else the shared rule. */
export function resolveSocketPath(setting: string | undefined, env: Env = process.env, warn?: Warn): string {
  const trimmed = (setting ?? "").trim();
  if (trimmed) {
    return expandHome(trimmed, env);
  }
  return defaultSocketPath(env, undefined, undefined, warn);
}

function currentUid(): number {
  return typeof process.getuid === "function" ? process.getuid() : 0;
}
