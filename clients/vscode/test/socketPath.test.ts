// The TypeScript socket path rule agrees with the Python client's, case by case.
import { spawnSync } from "node:child_process";
import * as assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { after, test } from "node:test";

import { defaultSocketPath, resolveSocketPath, runtimeDirProblem, type Env } from "../src/core/socketPath";
import { PYTHON, REPO_ROOT, cleanup, tempDir } from "./helpers";

const tmp = tempDir();
after(() => cleanup(tmp));
// Runtime folders: the user's own 0700 one, one open to others, a file in the place of one.
const run = path.join(tmp, "run");
const open = path.join(tmp, "open");
const afile = path.join(tmp, "afile");
fs.mkdirSync(run, { mode: 0o700 });
fs.mkdirSync(open);
fs.chmodSync(open, 0o755);
fs.writeFileSync(afile, "");

/** The Python client's socket path, and whether it warned that XDG_RUNTIME_DIR was passed over. */
function pythonRule(env: Env, platform?: string): { path: string; warned: boolean } {
  const arg = platform ? JSON.stringify(platform) : "";
  const clients = JSON.stringify(path.join(REPO_ROOT, "clients"));
  const script = `import sys; sys.path.insert(0, ${clients}); from memoryd_client.client import default_socket_path; print(default_socket_path(${arg}))`;
  const clean: NodeJS.ProcessEnv = { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: "/nonexistent-home" };
  for (const [k, v] of Object.entries(env)) {
    if (v !== undefined) {
      clean[k] = v;
    }
  }
  // This process's working directory: a relative MEMORYD_SOCKET is taken from it on both sides.
  const result = spawnSync(PYTHON, ["-c", script], { cwd: process.cwd(), env: clean, encoding: "utf8" });
  assert.equal(result.status, 0, result.stderr);
  return { path: result.stdout.trim(), warned: result.stderr.includes("is passed over") };
}

function pythonSocketPath(env: Env, platform?: string): string {
  return pythonRule(env, platform).path;
}

const cases: Array<[string, Env]> = [
  ["MEMORYD_SOCKET wins", { MEMORYD_SOCKET: "/srv/md/custom.sock", XDG_RUNTIME_DIR: run }],
  ["MEMORYD_SOCKET with spaces and unicode", { MEMORYD_SOCKET: path.join(tmp, "my sökets ✓", "m.sock") }],
  // MEMORYD_SOCKET was used as given: "~/m.sock" looked for literally, a relative one from the
  // extension host's folder, "/a//b/./c/" kept as typed.
  ["a leading ~ in MEMORYD_SOCKET is the home folder", { MEMORYD_SOCKET: "~/m.sock", HOME: "/home/ada" }],
  ["a relative HOME gives way to the password database's", { MEMORYD_SOCKET: "~/m.sock", HOME: "rel" }],
  ["a relative MEMORYD_SOCKET is taken from the working directory", { MEMORYD_SOCKET: "rel/./m.sock" }],
  ["MEMORYD_SOCKET spelled as pathlib spells it", { MEMORYD_SOCKET: "/srv/x//md/../d.sock/" }],
  ["an XDG_CACHE_HOME with .. keeps it, as pathlib does", { XDG_CACHE_HOME: "/c/../d/" }],
  ["XDG_RUNTIME_DIR next: the user's own 0700 folder", { XDG_RUNTIME_DIR: run, XDG_CACHE_HOME: "/c" }],
  ["XDG_RUNTIME_DIR with a trailing slash", { XDG_RUNTIME_DIR: run + "/" }],
  ["a missing XDG_RUNTIME_DIR is passed over", { XDG_RUNTIME_DIR: "/run/user/4242", XDG_CACHE_HOME: "/c" }],
  ["an XDG_RUNTIME_DIR open to others is passed over", { XDG_RUNTIME_DIR: open, TMPDIR: tmp }],
  ["a file as XDG_RUNTIME_DIR is passed over", { XDG_RUNTIME_DIR: afile, XDG_CACHE_HOME: "/c" }],
  ["XDG_CACHE_HOME next", { XDG_CACHE_HOME: "/home/ada/.cache" }],
  ["empty values are unset", { MEMORYD_SOCKET: "", XDG_RUNTIME_DIR: "", XDG_CACHE_HOME: "/cache" }],
  ["a relative XDG_RUNTIME_DIR is passed over", { XDG_RUNTIME_DIR: "run", XDG_CACHE_HOME: "/cache" }],
  ["a relative XDG_CACHE_HOME is passed over", { XDG_CACHE_HOME: "relative/cache", TMPDIR: tmp }],
  ["per-user fallback under TMPDIR", { TMPDIR: tmp }],
  ["TMPDIR that does not exist is passed over", { TMPDIR: path.join(tmp, "missing"), TEMP: tmp }],
  ["per-user fallback under /tmp", {}],
];

for (const [name, env] of cases) {
  test(`socket path agrees with memoryd_client: ${name}`, () => {
    const warnings: string[] = [];
    const python = pythonRule(env, "linux");
    assert.equal(defaultSocketPath(env, undefined, "linux", (m) => warnings.push(m)), python.path);
    // Warned exactly where the Python client warns, once however often the rule runs.
    defaultSocketPath(env, undefined, "linux", (m) => warnings.push(m));
    assert.equal(warnings.length, python.warned ? 1 : 0, warnings.join("\n"));
    if (python.warned) {
      assert.match(warnings[0], new RegExp(`^XDG_RUNTIME_DIR=.* is passed over: .*; the socket is ${python.path.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}$`));
    }
  });
}

test("what is wrong with a runtime folder is said", () => {
  assert.equal(runtimeDirProblem(run), undefined);
  assert.match(runtimeDirProblem("/run/user/4242") ?? "", /does not exist/);
  assert.match(runtimeDirProblem(open) ?? "", /its mode is 0755, open to others/);
  assert.match(runtimeDirProblem(afile) ?? "", /is not a folder/);
  assert.match(runtimeDirProblem(run, 65534) ?? "", /belongs to uid \d+, not to you \(uid 65534\)/);
  assert.match(runtimeDirProblem("run") ?? "", /not an absolute path/);
});

test("socket path agrees with memoryd_client on macOS: ~/Library/Caches unless MEMORYD_SOCKET", () => {
  for (const env of [{ HOME: "/Users/ada", XDG_RUNTIME_DIR: "/run/user/5" }, { HOME: "/Users/ada", MEMORYD_SOCKET: "/s.sock" }, { HOME: "rel" }]) {
    assert.equal(defaultSocketPath(env, 501, "darwin"), pythonSocketPath(env, "darwin"));
  }
  assert.equal(defaultSocketPath({ HOME: "/Users/ada" }, 501, "darwin"), "/Users/ada/Library/Caches/memoryd/memoryd.sock");
});

test("the fallback names the uid", () => {
  assert.equal(defaultSocketPath({}, 4242, "linux"), "/tmp/memoryd-4242/memoryd.sock");
});

test("the socketPath setting overrides the rule; ~ is the home folder; blank means unset", () => {
  assert.equal(resolveSocketPath("/x/y.sock", { MEMORYD_SOCKET: "/a.sock" }), "/x/y.sock");
  assert.equal(resolveSocketPath("~/m.sock", { HOME: "/home/ada" }), "/home/ada/m.sock");
  // as $MEMORYD_SOCKET: a relative or missing $HOME is the password database's home
  assert.equal(resolveSocketPath("~/m.sock", { HOME: "rel" }), `${os.userInfo().homedir}/m.sock`);
  assert.equal(resolveSocketPath("~/m.sock", {}), `${os.userInfo().homedir}/m.sock`);
  assert.equal(resolveSocketPath("  ", { MEMORYD_SOCKET: "/a.sock" }), "/a.sock");
  assert.equal(resolveSocketPath(undefined, { XDG_RUNTIME_DIR: run }), path.join(run, "memoryd", "memoryd.sock"));
});
