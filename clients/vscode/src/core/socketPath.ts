// The socket path rule every memoryd client shares (clients/memoryd_client/client.py,
// default_socket_path): $MEMORYD_SOCKET; else on macOS ~/Library/Caches/memoryd/memoryd.sock;
// else $XDG_RUNTIME_DIR/memoryd/memoryd.sock, else $XDG_CACHE_HOME/memoryd/memoryd.sock, else
// <tempdir>/memoryd-<uid>/memoryd.sock.
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

export function defaultSocketPath(env: Env = process.env, uid: number = currentUid(), platform: string = process.platform): string {
  const configured = env.MEMORYD_SOCKET;
  if (configured) {
    return configured;
  }
  if (platform === "darwin") {
    return path.join(env.HOME || os.homedir(), "Library", "Caches", "memoryd", "memoryd.sock");
  }
  // An XDG base directory counts only when absolute (the XDG spec ignores a relative one).
  const runtime = env.XDG_RUNTIME_DIR;
  if (runtime && path.isAbsolute(runtime)) {
    return path.join(runtime, "memoryd", "memoryd.sock");
  }
  const cache = env.XDG_CACHE_HOME;
  if (cache && path.isAbsolute(cache)) {
    return path.join(cache, "memoryd", "memoryd.sock");
  }
  return path.join(pythonTempDir(env), `memoryd-${uid}`, "memoryd.sock");
}

/** The socket to use: the `memoryd.socketPath` setting when set, else the shared rule. */
export function resolveSocketPath(setting: string | undefined, env: Env = process.env): string {
  const trimmed = (setting ?? "").trim();
  if (trimmed) {
    return trimmed.startsWith("~/") && env.HOME ? path.join(env.HOME, trimmed.slice(2)) : trimmed;
  }
  return defaultSocketPath(env);
}

function currentUid(): number {
  return typeof process.getuid === "function" ? process.getuid() : 0;
}
