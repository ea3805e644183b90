// The TypeScript socket path rule agrees with the Python client's, case by case.
import { spawnSync } from "node:child_process";
import * as assert from "node:assert/strict";
import * as path from "node:path";
import { after, test } from "node:test";

import { defaultSocketPath, resolveSocketPath, type Env } from "../src/core/socketPath";
import { PYTHON, REPO_ROOT, cleanup, tempDir } from "./helpers";

const tmp = tempDir();
after(() => cleanup(tmp));

function pythonSocketPath(env: Env, platform?: string): string {
  const arg = platform ? JSON.stringify(platform) : "";
  const script = `import sys; sys.path.insert(0, 'clients'); from memoryd_client.client import default_socket_path; print(default_socket_path(${arg}))`;
  const clean: NodeJS.ProcessEnv = { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: "/nonexistent-home" };
  for (const [k, v] of Object.entries(env)) {
    if (v !== undefined) {
      clean[k] = v;
    }
  }
  const result = spawnSync(PYTHON, ["-c", script], { cwd: REPO_ROOT, env: clean, encoding: "utf8" });
  assert.equal(result.status, 0, result.stderr);
  return result.stdout.trim();
}

const cases: Array<[string, Env]> = [
  ["MEMORYD_SOCKET wins", { MEMORYD_SOCKET: "/srv/md/custom.sock", XDG_RUNTIME_DIR: "/run/user/7" }],
  ["MEMORYD_SOCKET with spaces and unicode", { MEMORYD_SOCKET: path.join(tmp, "my sökets ✓", "m.sock") }],
  ["XDG_RUNTIME_DIR next", { XDG_RUNTIME_DIR: "/run/user/1000", XDG_CACHE_HOME: "/c" }],
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
    assert.equal(defaultSocketPath(env, undefined, "linux"), pythonSocketPath(env, "linux"));
  });
}

test("socket path agrees with memoryd_client on macOS: ~/Library/Caches unless MEMORYD_SOCKET", () => {
  for (const env of [{ HOME: "/Users/ada", XDG_RUNTIME_DIR: "/run/user/5" }, { HOME: "/Users/ada", MEMORYD_SOCKET: "/s.sock" }]) {
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
  assert.equal(resolveSocketPath("  ", { MEMORYD_SOCKET: "/a.sock" }), "/a.sock");
  assert.equal(resolveSocketPath(undefined, { XDG_RUNTIME_DIR: "/run/user/5" }), "/run/user/5/memoryd/memoryd.sock");
});
