// src/extension.ts itself, loaded over a stand-in `vscode` module (test/fakeVscode.ts), against
// the real daemon: what the user sees after choosing a memory, running a command while the
// daemon is down, saving text that holds a secret, a notebook cell or a git: view in a second
// folder, a folder removed, a setting changed mid-call, and names that hold a command link.
import * as assert from "node:assert/strict";
import * as fs from "node:fs";
import * as http from "node:http";
import * as net from "node:net";
import type { AddressInfo } from "node:net";
import * as path from "node:path";
import { after, afterEach, before, describe, test } from "node:test";

import { asField, errorText, messageText } from "../src/core/format";
import { EVENTS } from "../src/core/notifications";
import { concernsTarget } from "../src/core/rules";
import { MemorydClient, RpcError } from "../src/core/rpcClient";
import { modelProblem, otherDaemonWarning, setupProblems, shellQuote, statusView, teamState, whyOff, whySuppressed } from "../src/core/status";
import type { StatusResult } from "../src/core/types";
import * as F from "./fakeVscode";
import { CALL_TIMEOUT_MS, PATIENCE_MS, Daemon, TeamServer, cleanup, fakeServer, forwardingServer, type FakeServer, isolatedEnv, makeRepo, resultReply, stoppingReply, tempDir, waitFor } from "./helpers";

F.install();
// eslint-disable-next-line @typescript-eslint/no-require-imports
const extension = require("../src/extension") as { activate(ctx: { subscriptions: Array<{ dispose(): void }> }): void; deactivate(): void };

/** VS Code's LINK_REGEX (workbench/common/notifications.ts): what a message turns into a link. */
const LINK = /\[([^\]]+)\]\(((?:https?:\/\/|command:|file:)[^)\s]+)(?: (["'])(.+?)(\3))?\)/i;
const SECRET = "ghp_8f2KxQ7mZ1pR4tV9wY3bN6cD0eF5gH2jL8kM"; // a GitHub PAT's shape, not a real one

const tmp = tempDir("mdx-");
const env = isolatedEnv(tmp);
const socketPath = path.join(tmp, "x.sock");
const one = makeRepo(path.join(tmp, "one"));
const two = makeRepo(path.join(tmp, "two"));
fs.writeFileSync(two.claudeMd, "# Two\n"); // no @include: tells the two apart
let daemon: Daemon;
let active: { subscriptions: Array<{ dispose(): void }> } | undefined;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Whether `promise` settles within `ms`, its timer cleared either way (one left pending kept
 * the test file's process alive until it fired). */
async function settlesWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), ms)));
  try {
    return await Promise.race([promise.then(() => true), expired]);
  } finally {
    clearTimeout(timer);
  }
}

/** Dispose the extension activated last, as VS Code does on deactivation. */
function deactivateActive(): void {
  for (const d of active?.subscriptions ?? []) {
    d.dispose();
  }
  extension.deactivate();
  active = undefined;
}

function activate(sock: string, folders: string[], settings: Record<string, unknown> = {}): void {
  // A test that activates twice left the first one running: its connection's close showed an
  // outage warning among the next one's messages, taking an answer queued for them.
  deactivateActive();
  F.reset();
  // The extension's 5 s call timeout was passed on a loaded machine (a remember, a status); a
  // connect timed out by an event loop held up for 2 s would show the outage warning, whose
  // items take the answers queued for a command's questions.
  F.fake.config = { "memoryd.socketPath": sock, "memoryd.requestTimeoutMs": CALL_TIMEOUT_MS, "memoryd.connectTimeoutMs": CALL_TIMEOUT_MS, ...settings };
  F.fake.workspaceFolders = folders.map((f, index) => ({ uri: F.Uri.file(f), name: path.basename(f), index }));
  active = { subscriptions: [] };
  extension.activate(active);
}

async function up(): Promise<void> {
  await waitFor(() => (F.fake.statusItems[0]?.text ?? "").includes("memoryd ·"), PATIENCE_MS, "the status bar to show the daemon up");
}

/** Run a command as the palette does, with the user's answers to its questions. */
async function run(command: string, answers: unknown[], ...args: unknown[]): Promise<F.Shown[]> {
  const before = F.fake.shown.length;
  F.fake.answers.push(...answers);
  const fn = F.fake.commands.get(command);
  assert.ok(fn, `${command} is registered`);
  await fn(...args);
  return F.fake.shown.slice(before);
}

/** Show Status's own message: a worker-error notice (a refused pull, a refused model call) can
 * be shown while it runs, before it. */
async function showStatus(): Promise<F.Shown> {
  const said = (await run("memoryd.status", [undefined])).filter((s) => s.items.includes("Refresh"));
  assert.equal(said.length, 1, JSON.stringify(said));
  return said[0]!;
}

async function memoryNodes(): Promise<Array<{ label: string; path: string; data?: Record<string, string> }>> {
  const provider = F.fake.trees.get("memoryd.memoriesView")!;
  const roots = (await provider.getChildren()) as Array<{ id: string; children?: Array<{ children?: unknown[] }> }>;
  const memories = roots.find((n) => n.id === "memories");
  return (memories?.children ?? []).flatMap((group) => (group.children ?? []) as Array<{ label: string; path: string }>);
}

/** A memory remembered from `selected` in the first folder's API file, as its Memories row. */
async function rememberedRow(selected: string, name: string): Promise<{ label: string; path: string; data?: Record<string, string> }> {
  F.openEditor(F.Uri.file(one.apiFile), selected);
  await run("memoryd.remember", [2, name]);
  const node = (await memoryNodes()).find((n) => n.label === name);
  assert.ok(node, `${name} listed`);
  return node;
}

type StandInRequest = { id: number; method: string; params: Record<string, unknown> };
type StandInAnswer = (reply: { result: unknown } | { error: { code: number; message: string } }) => void;

/**
 * A stand-in daemon whose memory folder holds one memory file (`file`): it answers subscribe,
 * memory.list and memory.reconcile, and hands every other request to `other`.
 */
async function memoryFolderStandIn(name: string, other: (request: StandInRequest, answer: StandInAnswer) => void): Promise<{ server: FakeServer; file: string }> {
  const memoryDir = path.join(tmp, `${name}-memory`);
  fs.mkdirSync(memoryDir, { recursive: true });
  const file = path.join(memoryDir, "project_api_freeze.md");
  fs.writeFileSync(file, "---\nname: API freeze\ndescription: after March 5\ntype: project\n---\nx\n");
  const server = await fakeServer(path.join(tmp, `${name}.sock`), (line, s) => {
    const request = JSON.parse(line) as StandInRequest;
    const answer: StandInAnswer = (reply) => s.write(JSON.stringify({ jsonrpc: "2.0", id: request.id, ...reply }) + "\n");
    if (request.method === "subscribe") {
      answer({ result: { subscribed: [] } });
    } else if (request.method === "memory.list") {
      answer({ result: { instruction_files: [], memories: [], memory_dir: memoryDir, team_dir: null, warnings: [] } });
    } else if (request.method === "memory.reconcile") {
      answer({ result: { added: 0, removed: 0 } });
    } else {
      other(request, answer);
    }
  });
  return { server, file };
}

before(async () => {
  daemon = await Daemon.start(socketPath, env);
});
afterEach(deactivateActive);
after(async () => {
  await daemon.stop();
  cleanup(tmp);
});

describe("the extension in a stand-in VS Code", () => {
  test("choosing a memory keeps both views on its project; Delete from the view then works", async () => {
    activate(socketPath, [one.root]);
    await up();
    const node = await rememberedRow("The API freezes after March 5", "API freeze");
    await F.fake.commands.get("memoryd.openPath")!(node); // the row's click
    assert.deepEqual(F.fake.opened, [node.path]);
    await sleep(300);
    const memories = (await F.viewText("memoryd.memoriesView")).join("\n");
    assert.match(memories, /API freeze/, `the Memories view still lists the project's memories:\n${memories}`);
    const rules = (await F.viewText("memoryd.rulesView")).join("\n");
    assert.match(rules, /docs\/style\.md/, `the Rules view is still the project's:\n${rules}`);
    const said = await run("memoryd.deleteMemory", ["Delete"], node);
    assert.deepEqual(said.filter((m) => m.level === "error"), []);
    assert.equal(fs.existsSync(node.path), false, "deleted");
  });

  test("a memory's menu acts in the project it was listed for, whatever editor is active", async () => {
    activate(socketPath, [one.root, two.root]);
    await up();
    const node = await rememberedRow("Releases leave on Tuesdays", "Release train");
    F.openEditor(F.Uri.file(two.apiFile)); // the other folder's file, before the view catches up
    const said = await run("memoryd.deleteMemory", ["Delete"], node);
    assert.deepEqual(said.filter((m) => m.level === "error"), []);
    assert.equal(fs.existsSync(node.path), false);
  });

  test("a command run while the daemon is down says what was not done", async () => {
    const sock = path.join(tmp, "down", "d.sock");
    activate(sock, [one.root]);
    await waitFor(() => F.fake.shown.length > 0, PATIENCE_MS, "the outage warning");
    assert.equal(F.fake.shown.length, 1, "one warning for the outage");
    F.openEditor(F.Uri.file(one.apiFile), "The API freezes after March 5");
    const said = await run("memoryd.remember", [2, "API freeze"]);
    assert.equal(said.length, 1, JSON.stringify(said));
    assert.equal(said[0]!.level, "error");
    assert.match(said[0]!.text, /^memoryd: not saved: memoryd is not running on .*d\.sock/);
    assert.deepEqual(said[0]!.items, ["Start memoryd"]);
    const recalled = await run("memoryd.recall", ["deploys"]);
    assert.match(recalled[0]?.text ?? "", /^memoryd: recall failed: memoryd is not running/);
  });

  test("a folder at the socket path: said as it is, and no Start memoryd, which cannot replace it", async () => {
    const sock = path.join(tmp, "folder.sock");
    fs.mkdirSync(sock);
    activate(sock, [one.root]);
    await waitFor(() => F.fake.shown.length > 0, PATIENCE_MS, "the outage warning");
    const what = `memoryd is not running on ${sock}: it is a folder, not a socket; is --socket or MEMORYD_SOCKET mistyped?`;
    assert.ok(F.fake.shown[0]!.text.startsWith(what), F.fake.shown[0]!.text);
    assert.deepEqual(F.fake.shown[0]!.items, ["Settings"]);
    const recalled = await run("memoryd.recall", ["deploys"]);
    assert.ok(recalled[0]!.text.startsWith(`memoryd: recall failed: ${what}`), recalled[0]!.text);
    assert.deepEqual(recalled[0]!.items, []);
    assert.deepEqual((await showStatus()).items, ["Refresh"]);
  });

  test("a socket path too long for a socket: said as it is, and no Start memoryd, which cannot listen there", async () => {
    const folder = path.join(tmp, "l".repeat(130));
    fs.mkdirSync(folder, { recursive: true });
    const sock = path.join(folder, "memoryd.sock");
    activate(sock, [one.root]);
    await waitFor(() => F.fake.shown.length > 0, PATIENCE_MS, "the outage warning");
    assert.match(F.fake.shown[0]!.text, /^memoryd is not running on .*: its path is \d+ bytes, over the 10[37] a Unix socket's path may have; /);
    assert.deepEqual(F.fake.shown[0]!.items, ["Settings"]);
  });

  test("a write the daemon warns about (it holds a secret) is a warning that says so", async () => {
    activate(socketPath, [one.root]);
    await up();
    F.openEditor(F.Uri.file(one.apiFile), `the CI token is ${SECRET}`);
    const said = await run("memoryd.remember", [3, "CI token"]);
    const saved = said.find((m) => /Saved memory/.test(m.text));
    assert.ok(saved, JSON.stringify(said));
    assert.equal(saved.level, "warning");
    assert.match(saved.text, /looks like it holds a secret .*github-pat/);
    assert.ok(!saved.text.includes(SECRET), "the secret itself is not shown");
  });

  test("a notebook cell or a git: view of a file in the second folder shows that folder's rules", async () => {
    activate(socketPath, [one.root, two.root]);
    await up();
    for (const scheme of ["vscode-notebook-cell", "git"]) {
      F.openEditor(F.Uri.from({ scheme, path: path.join(two.root, "src", "api", "model.ipynb"), query: scheme === "git" ? "ref=HEAD" : "" }));
      const rules = (await F.viewText("memoryd.rulesView")).join("\n");
      assert.ok(!rules.includes("docs/style.md"), `${scheme}: not folder one's CLAUDE.md:\n${rules}`);
      assert.match(rules, /api\.md {2}— Project · paths: src\/api\/\*\* matched src\/api\/model\.ipynb/, `${scheme}:\n${rules}`);
    }
    F.openEditor(F.Uri.from({ scheme: "output", path: "extension-output-memoryd" }));
    assert.match((await F.viewText("memoryd.rulesView")).join("\n"), /docs\/style\.md/, "a panel that is no file: the first folder");
  });

  test("a failed delete refreshes the Memories view while its error is still open", async () => {
    // VS Code settles a message's promise only when the user closes it; the stand-in's stay
    // pending too. The refresh after a failed delete waited for that.
    activate(socketPath, [one.root]);
    await up();
    let refreshed = 0;
    (F.fake.trees.get("memoryd.memoriesView")!.onDidChangeTreeData as (l: () => void) => unknown)(() => refreshed++);
    // a row whose file the daemon refuses to delete (outside the memory folder): -32002
    const node = { label: "stray", path: path.join(one.root, "not-a-memory.md"), data: { cwd: one.root } };
    F.fake.answers.push("Delete");
    const deleting = Promise.resolve(F.fake.commands.get("memoryd.deleteMemory")!(node));
    // Waiting for the error to be closed never ends; a loaded machine may take seconds to delete.
    const finished = await settlesWithin(deleting, PATIENCE_MS);
    const error = F.fake.shown.find((m) => m.text.startsWith("memoryd: not deleted:"));
    assert.ok(error, JSON.stringify(F.fake.shown));
    assert.match(error.text, /^memoryd: not deleted: .*not-a-memory\.md is outside the memory directory/);
    assert.equal(error.closed, false, "the error is still open");
    assert.ok(finished, "Delete finished without waiting for its error to be closed");
    assert.ok(refreshed >= 1, "the Memories view refreshed");
    error.close();
  });

  test("a memory saved by hand keeps the text it replaced in history (it was kept nowhere)", async () => {
    activate(socketPath, [one.root]);
    await up();
    const node = await rememberedRow("Deploys happen on Thursdays", "Deploy day");
    await F.fake.commands.get("memoryd.openPath")!(node);
    const before = fs.readFileSync(node.path, "utf8");
    const doc = new F.TextDocument(F.Uri.file(node.path), `${before}Not on public holidays.\n`);
    await F.save(doc, () => fs.writeFileSync(node.path, doc.getText()));
    const client = new MemorydClient({ socketPath, timeoutMs: CALL_TIMEOUT_MS });
    try {
      const history = await client.call<{ versions: Array<{ version: string; size: number; reason: string }> }>("memory.history", { cwd: one.root, path: node.path });
      assert.equal(history.versions.length, 1, JSON.stringify(history));
      assert.equal(history.versions[0]!.reason, "edit");
      assert.equal(history.versions[0]!.size, Buffer.byteLength(before));
    } finally {
      client.close();
    }
    assert.deepEqual(F.fake.shown.filter((m) => m.level !== "info"), [], "no warning");
  });

  test("a save the daemon cannot snapshot goes on and says the replaced text was not kept", async () => {
    const sock = path.join(tmp, "older.sock");
    // a daemon started before memory.snapshot existed
    const { server, file } = await memoryFolderStandIn("older", (request, answer) =>
      answer({ error: { code: -32601, message: `method not found: ${request.method}` } }),
    );
    try {
      activate(sock, [one.root]);
      await F.viewText("memoryd.memoriesView"); // lists the memory folder
      const doc = new F.TextDocument(F.Uri.file(file), "edited by hand");
      await F.save(doc, () => fs.writeFileSync(file, doc.getText()));
      assert.equal(fs.readFileSync(file, "utf8"), "edited by hand", "the save went on");
      await waitFor(() => F.fake.shown.some((m) => m.level === "warning"), PATIENCE_MS, "the warning");
      const warning = F.fake.shown.find((m) => m.level === "warning")!;
      assert.match(warning.text, /^memoryd: project_api_freeze\.md: the text this save replaced was not kept in history: the running memoryd is older than this extension/);
      // Any call it lacks says the daemon's age, not only "method not found" (which reads as a bug).
      const recalled = await run("memoryd.recall", ["deploys"]);
      assert.match(recalled[0]?.text ?? "", /^memoryd: recall failed: method not found: recall \(the running memoryd may be older than this extension, started before an upgrade: `memctl restart` runs the installed one\)$/);
      assert.equal(errorText(new RpcError(-32602, "invalid params: cwd: must be an absolute path")), "invalid params: cwd: must be an absolute path", "the user's own mistake: no hint");
      assert.match(errorText(new RpcError(-32602, "invalid params: explain: Extra inputs are not permitted")), /may be older than this extension/);
    } finally {
      await server.close();
    }
  });

  test("a save that stopped waiting for the snapshot: the daemon answering later keeps nothing of the new text", async () => {
    // Found by a bug hunt: the save went ahead after SNAPSHOT_WAIT_MS, the daemon ran the
    // snapshot later and kept the NEW text as the "edit" version, while the user was told the
    // old text was not kept. The request names the file's stamp; the daemon refuses it.
    const sock = path.join(tmp, "forward.sock");
    const forward = await forwardingServer(sock, socketPath);
    const client = new MemorydClient({ socketPath, timeoutMs: CALL_TIMEOUT_MS });
    try {
      activate(sock, [one.root]);
      await up();
      const node = await rememberedRow("Releases are tagged by hand", "Release tags");
      const versions = async () =>
        (await client.call<{ versions: Array<{ size: number }> }>("memory.history", { cwd: one.root, path: node.path })).versions;
      const before = await versions();
      const doc = new F.TextDocument(F.Uri.file(node.path), `${fs.readFileSync(node.path, "utf8")}Written while memoryd was stopped.\n`);
      assert.ok(daemon.proc.kill("SIGSTOP"), "stopped the daemon");
      try {
        await F.save(doc, () => fs.writeFileSync(node.path, doc.getText()));
      } finally {
        daemon.proc.kill("SIGCONT");
      }
      assert.match(fs.readFileSync(node.path, "utf8"), /Written while memoryd was stopped\.\n$/, "the save went on");
      const warning = F.fake.shown.find((m) => m.level === "warning");
      assert.match(warning?.text ?? JSON.stringify(F.fake.shown), /the text this save replaced was not kept in history: memoryd did not answer memory\.snapshot within \d+ ms$/);
      await waitFor(() => forward.exchanges.some((e) => e.request.method === "memory.snapshot"), PATIENCE_MS, "the daemon's late answer to the snapshot");
      const late = forward.exchanges.find((e) => e.request.method === "memory.snapshot")!;
      assert.equal(late.reply.result, undefined, "a version kept of the text written after the stamp");
      assert.match(late.reply.error?.message ?? "", /changed since the snapshot was asked for/);
      assert.deepEqual(await versions(), before, "versions");
    } finally {
      daemon.proc.kill("SIGCONT");
      client.close();
      await forward.close();
    }
  });

  test("a daemon older than the snapshot's expect (it refuses the field) is asked again without it", async () => {
    const sock = path.join(tmp, "no-expect.sock");
    const asked: Array<Record<string, unknown>> = [];
    const { server, file } = await memoryFolderStandIn("no-expect", (request, answer) => {
      if (request.method !== "memory.snapshot") {
        answer({ error: { code: -32601, message: `method not found: ${request.method}` } });
        return;
      }
      asked.push(request.params);
      // what a daemon before session 23 answers (its params models forbid extra fields)
      const refused = { error: { code: -32602, message: "invalid params: expect: Extra inputs are not permitted" } };
      answer(request.params.expect === undefined ? { result: { path: file, version: "v1" } } : refused);
    });
    try {
      activate(sock, [one.root]);
      await F.viewText("memoryd.memoriesView"); // lists the memory folder
      const stamp = fs.lstatSync(file, { bigint: true });
      const doc = new F.TextDocument(F.Uri.file(file), "edited by hand");
      await F.save(doc, () => fs.writeFileSync(file, doc.getText()));
      assert.equal(asked.length, 2, JSON.stringify(asked));
      assert.deepEqual(asked[0]!.expect, { size: Number(stamp.size), mtime_ns: stamp.mtimeNs.toString() }, "the stamp sent first");
      assert.match(String((asked[0]!.expect as { mtime_ns: string }).mtime_ns), /^\d{19}$/, "nanoseconds, as digits");
      assert.equal(asked[1]!.expect, undefined, "the second without it");
      assert.deepEqual(F.fake.shown.filter((m) => m.level !== "info"), [], "no warning");
    } finally {
      await server.close();
    }
  });

  test("a reconcile that left a protected team/MEMORY.md says so after the save; a warnings field of another shape says nothing", async () => {
    // Since session 24 memory.reconcile rewrites MEMORY.md and names a protected team/MEMORY.md
    // in `warnings` instead of failing: the save said nothing of it.
    const sock = path.join(tmp, "reconcile-warnings.sock");
    const memoryDir = path.join(tmp, "reconcile-warnings-memory");
    const protectedIndex = path.join(memoryDir, "team", "MEMORY.md");
    const warning = `not reconciled: ${protectedIndex} is read-only: chmod u+w ${protectedIndex} allows it`;
    const replies: unknown[] = [
      { added: 1, removed: 0, warnings: [warning, 7, ""] },
      { added: 0, removed: 0, warnings: "not a list" },
      { added: 0, removed: 0, warnings: null },
      { added: 0, removed: 0, warnings: ["the last one"] },
    ];
    let reconciles = 0;
    const server = await fakeServer(sock, (line, s) => {
      const request = JSON.parse(line) as { id: number; method: string };
      const reply = (result: unknown) => s.write(resultReply(request.id, result));
      if (request.method === "subscribe") {
        reply({ subscribed: [] });
      } else if (request.method === "memory.list") {
        reply({ instruction_files: [], memories: [], memory_dir: memoryDir, team_dir: null, warnings: [] });
      } else if (request.method === "memory.reconcile") {
        reply(replies[reconciles++]);
      } else {
        s.write(JSON.stringify({ jsonrpc: "2.0", id: request.id, error: { code: -32003, message: "not here" } }) + "\n");
      }
    });
    try {
      activate(sock, [one.root]);
      await F.viewText("memoryd.memoriesView"); // lists the memory folder
      const saved = new F.TextDocument(F.Uri.file(path.join(memoryDir, "user_coffee.md")), "edited by hand");
      const said = () => F.fake.shown.map((m) => [m.level, m.text]);
      F.fake.onDidSaveTextDocument.fire(saved);
      await waitFor(() => F.fake.shown.length >= 1, PATIENCE_MS, "the reconcile's warning");
      assert.deepEqual(said(), [["warning", `memoryd: MEMORY.md not brought in step: ${warning}`]]);
      // answered in order on one connection: the last one's warning comes after the other two
      for (let i = 0; i < 3; i++) {
        F.fake.onDidSaveTextDocument.fire(saved);
      }
      await waitFor(() => F.fake.shown.length >= 2, PATIENCE_MS, "the last reconcile's warning");
      assert.equal(reconciles, 4);
      assert.deepEqual(said().slice(1), [["warning", "memoryd: MEMORY.md not brought in step: the last one"]]);
    } finally {
      await server.close();
    }
  });

  test("a failed reconcile after saving a memory refreshes the Memories view while its error is open", async () => {
    const sock = path.join(tmp, "reconcile.sock");
    const memoryDir = path.join(tmp, "reconcile-memory");
    let reconciles = 0;
    const server = await fakeServer(sock, (line, s) => {
      const request = JSON.parse(line) as { id: number; method: string };
      const reply = (result: unknown) => s.write(resultReply(request.id, result));
      const fail = (code: number, message: string) => s.write(JSON.stringify({ jsonrpc: "2.0", id: request.id, error: { code, message } }) + "\n");
      if (request.method === "subscribe") {
        reply({ subscribed: [] });
      } else if (request.method === "memory.list") {
        reply({ instruction_files: [], memories: [], memory_dir: memoryDir, team_dir: null, warnings: [] });
      } else if (request.method === "memory.reconcile") {
        reconciles++;
        fail(-32603, "disk full");
      } else {
        fail(-32003, "not here");
      }
    });
    try {
      activate(sock, [one.root]);
      await F.viewText("memoryd.memoriesView"); // lists the memory folder
      let refreshed = 0;
      (F.fake.trees.get("memoryd.memoriesView")!.onDidChangeTreeData as (l: () => void) => unknown)(() => refreshed++);
      F.fake.onDidSaveTextDocument.fire(new F.TextDocument(F.Uri.file(path.join(memoryDir, "api_freeze.md")), "edited by hand"));
      await waitFor(() => F.fake.shown.some((m) => m.level === "error"), PATIENCE_MS, "the reconcile's error");
      const error = F.fake.shown.find((m) => m.level === "error")!;
      assert.equal(error.text, "memoryd: MEMORY.md not brought in step: disk full");
      assert.equal(reconciles, 1);
      await waitFor(() => refreshed >= 1, PATIENCE_MS, "the Memories view to refresh while the error is open");
      assert.equal(error.closed, false);
      error.close();
    } finally {
      await server.close();
    }
  });

  test("a workspace folder removed at run time refreshes both views", async () => {
    activate(socketPath, [one.root, two.root]);
    await up();
    let refreshed = 0;
    for (const id of ["memoryd.rulesView", "memoryd.memoriesView"]) {
      (F.fake.trees.get(id)!.onDidChangeTreeData as (l: () => void) => unknown)(() => refreshed++);
    }
    F.setFolders([two.root]);
    await waitFor(() => refreshed >= 2, PATIENCE_MS, "both views to refresh");
    assert.ok(!(await F.viewText("memoryd.rulesView")).join("\n").includes("docs/style.md"));
  });

  test("a setting that is not the connection's leaves the connection and its calls alone", async () => {
    const sock = path.join(tmp, "slow.sock");
    let connections = 0;
    let answerRecall: (() => void) | undefined;
    const server = await fakeServer(sock, (line, s) => {
      const request = JSON.parse(line) as { id: number; method: string };
      const reply = (result: unknown) => s.write(resultReply(request.id, result));
      if (request.method === "recall") {
        // a model takes its time: answered once the setting has changed (a fixed delay did
        // not keep the call in flight that long on a loaded machine)
        answerRecall = () => reply({ memories: [], selector: "model" });
      } else if (request.method === "subscribe") {
        reply({ subscribed: [] });
      } else {
        s.write(JSON.stringify({ jsonrpc: "2.0", id: request.id, error: { code: -32003, message: "not here" } }) + "\n");
      }
    });
    server.server.on("connection", () => connections++);
    try {
      activate(sock, [one.root]);
      await waitFor(() => connections === 1, PATIENCE_MS, "the connection");
      F.openEditor(F.Uri.file(one.apiFile));
      F.fake.answers.push("deploys");
      const recall = F.fake.commands.get("memoryd.recall")!();
      await waitFor(() => answerRecall !== undefined, PATIENCE_MS, "the recall to reach the daemon");
      F.setConfig({ "memoryd.showNotifications": false });
      answerRecall!();
      await recall;
      assert.deepEqual(F.fake.shown.map((m) => m.text).filter((t) => /deploys/.test(t)), ['memoryd: no memory about "deploys"']);
      assert.equal(connections, 1);
      F.setConfig({ "memoryd.requestTimeoutMs": 4000 });
      await waitFor(() => connections === 2, PATIENCE_MS, "a new connection for a new timeout");
    } finally {
      await server.close();
    }
  });

  test("a timeout setting that is no number of at least 100 ms is the default, said once; one over what a timer holds is kept", async () => {
    // A string or a number under 1 made every timer fire at once, and so did one over 2^31 - 1
    // ms (1e10 meant as "as long as it takes"): each call "did not answer", the daemon shown down.
    const settings = { "memoryd.requestTimeoutMs": "5s", "memoryd.recallTimeoutMs": -1, "memoryd.connectTimeoutMs": 1e10 };
    activate(socketPath, [one.root], settings);
    await up();
    const warnings = () => F.fake.shown.filter((m) => m.level === "warning").map((m) => m.text);
    assert.deepEqual(warnings(), [
      'memoryd: memoryd.requestTimeoutMs is "5s", not a number of milliseconds of at least 100: 5000 is used',
      "memoryd: memoryd.recallTimeoutMs is -1, not a number of milliseconds of at least 100: 30000 is used",
    ]);
    F.openEditor(F.Uri.file(one.apiFile));
    const recalled = await run("memoryd.recall", ["deploys"]);
    assert.doesNotMatch(recalled.map((m) => m.text).join("\n"), /failed/);
    F.setConfig({ "memoryd.showNotifications": false }); // read again: said once
    assert.equal(warnings().length, 2);
    const client = new MemorydClient({ socketPath, timeoutMs: 1e10, connectTimeoutMs: 1e10 });
    try {
      assert.equal((await client.call<{ pid: number }>("status")).pid, daemon.proc.pid);
    } finally {
      client.close();
    }
  });

  test("a socketPath, memctlPath or showNotifications of the wrong type is the default, said once (a socketPath of 42 threw in activation)", async () => {
    // settings.json takes any JSON; VS Code warns of a wrong type only in its editor. The
    // socket rule then reads $MEMORYD_SOCKET, as it does in the extension host.
    const saved = process.env.MEMORYD_SOCKET;
    process.env.MEMORYD_SOCKET = socketPath;
    try {
      activate(socketPath, [one.root], { "memoryd.socketPath": 42, "memoryd.memctlPath": ["memctl"], "memoryd.showNotifications": "false" });
      await up();
      const warnings = () => F.fake.shown.filter((m) => m.level === "warning").map((m) => m.text);
      assert.deepEqual(warnings(), [
        "memoryd: memoryd.socketPath is 42, not a path: memctl's socket rule is used",
        'memoryd: memoryd.memctlPath is ["memctl"], not a command: "memctl" is used',
        'memoryd: memoryd.showNotifications is "false", not true or false: true is used',
      ]);
      F.openEditor(F.Uri.file(one.apiFile));
      const recalled = await run("memoryd.recall", ["deploys"]);
      assert.doesNotMatch(recalled.map((m) => m.text).join("\n"), /failed/);
      F.setConfig({ "memoryd.recallTimeoutMs": 20000 }); // read again: said once
      assert.equal(warnings().length, 3);
    } finally {
      if (saved === undefined) {
        delete process.env.MEMORYD_SOCKET;
      } else {
        process.env.MEMORYD_SOCKET = saved;
      }
    }
  });

  test("a name holding a command link or control characters is shown as text, never as a link", async () => {
    activate(socketPath, [one.root]);
    await up();
    const name = "[Show history](command:workbench.action.terminal.sendSequence?%7B%22text%22%3A%22id%5Cn%22%7D)";
    F.openEditor(F.Uri.file(one.apiFile), "Deploys go through the canary first");
    await run("memoryd.remember", [2, name]);
    const node = (await memoryNodes()).find((n) => n.label.startsWith("[Show history]"));
    assert.ok(node);
    const said = await run("memoryd.memoryHistory", [], node);
    const none = said.find((m) => m.text.startsWith("memoryd: no earlier versions of "));
    assert.match(none?.text ?? JSON.stringify(said), /^memoryd: no earlier versions of \[Show history\] \(command:/);
    // The daemon refuses to write a bidi override (6d215bf), and its refusal is shown as text;
    // a file written by hand (or a teammate's, pulled) still holds one, shown escaped.
    const refused = await run("memoryd.remember", [2, "evil\u202egnp.exe"]);
    assert.ok(refused.some((m) => /U\+202E/.test(m.text)), JSON.stringify(refused));
    const memoryDir = path.dirname(node.path);
    fs.writeFileSync(path.join(memoryDir, "project_evil.md"), "---\nname: evil\u202egnp.exe\ndescription: d\ntype: project\n---\nx\n");
    const spoof = (await memoryNodes()).find((n) => n.label.startsWith("evil"));
    assert.equal(spoof?.label, "evil\\u202egnp.exe", "shown in the order it is stored");
    for (const m of F.fake.shown) {
      assert.doesNotMatch(m.text, LINK, m.text);
      assert.doesNotMatch(m.text, /[\n\u202e]/, m.text);
    }
  });

  test("deleting a synced team memory shows the daemon's refusal as it says it, on one line", async () => {
    // A second daemon syncing with a real team server: only a team memory on the server is
    // refused (a pull would bring it back); one never pushed is deleted as any other.
    const sock = path.join(tmp, "team.sock");
    const teamRepo = makeRepo(path.join(tmp, "team-widgets"), { remote: "git@github.com:acme/widgets.git" });
    const server = await TeamServer.start(path.join(tmp, "team-server"), ["acme/widgets"]);
    let teamDaemon: Daemon | undefined;
    const probe = new MemorydClient({ socketPath: sock, reconnect: false, timeoutMs: CALL_TIMEOUT_MS });
    try {
      // in the try: a daemon that fails to start must not leave the server running (its
      // process kept this file's from ending)
      teamDaemon = await Daemon.start(sock, { ...env, MEMORYD_TEAM_URL: server.url, MEMORYD_TEAM_TOKEN: server.token, MEMORYD_TEAM_DEBOUNCE: "0.1" });
      activate(sock, [teamRepo.root]);
      await up();
      F.openEditor(F.Uri.file(teamRepo.apiFile), "No deploys on Fridays");
      await run("memoryd.remember", [2, "Deploy freeze", 1]); // project; the name; the team
      const node = (await memoryNodes()).find((n) => n.label === "Deploy freeze");
      assert.ok(node && /\/team\//.test(node.path), JSON.stringify(node));
      await waitFor(
        async () => {
          // `entries`: the server holds something, so the push seen is the memory's, not the
          // empty one the folder's first sync ends with (the watcher's debounce may not have
          // noticed the new file yet, and `pending` is empty until it has).
          const team = await probe.call<{ pending: string[]; entries: number; last_result: { op: string; ok: boolean } | null }>("team.status", { cwd: teamRepo.root });
          return team.entries > 0 && team.pending.length === 0 && team.last_result?.op === "push" && team.last_result.ok;
        },
        PATIENCE_MS,
        "the team memory to be pushed",
      );
      const said = await run("memoryd.deleteMemory", ["Delete"], node);
      // by what it says: a worker-error notice (a sync the loaded server was slow to answer)
      // is an error too, and may be shown first
      const refusal = said.find((m) => m.text.startsWith("memoryd: not deleted:"));
      assert.ok(refusal, JSON.stringify(said));
      assert.equal(
        refusal.text,
        `memoryd: not deleted: ${node.path} is a team memory, and deletions do not reach the team server: the next pull would bring it back, and its index line would go from every teammate's MEMORY.md. Edit it instead (say it no longer applies), or restore an older version on the server (\`memoryd-team restore\`)`,
      );
      assert.ok(fs.existsSync(node.path), "still there");
    } finally {
      probe.close();
      await teamDaemon?.stop();
      await server.stop();
    }
  });

  test("a second daemon of the user: the status tooltip and Show Status warn, with the other socket and how to keep one", async () => {
    // Same HOME as the suite's daemon, which started first.
    const sock = path.join(tmp, "second.sock");
    const second = await Daemon.start(sock, env);
    try {
      activate(sock, [one.root]);
      await up();
      const warning = `another memoryd of this user (pid ${daemon.proc.pid}) is running on ${socketPath}; keep one: memctl --socket ${socketPath} stop`;
      await waitFor(() => (F.fake.statusItems[0]?.tooltip ?? "").includes(warning), PATIENCE_MS, "the warning in the tooltip");
      const tooltip = F.fake.statusItems[0]!.tooltip!.split("\n");
      assert.equal(tooltip[1], `Socket: ${sock}`);
      assert.equal(tooltip[2], `Warning: ${warning} (hooks and editors whose socket names it talk to it, not to this one)`);
      assert.equal(F.fake.statusItems[0]!.backgroundColor?.id, "statusBarItem.warningBackground");
      const said = await showStatus();
      assert.equal(said.level, "warning");
      assert.ok(said.text.includes(`Warning: ${warning}`), said.text);
    } finally {
      await second.stop();
    }
    activate(socketPath, [one.root]); // the first: no other daemon, no warning
    await up();
    await run("memoryd.status", [undefined]);
    assert.doesNotMatch(F.fake.statusItems[0]!.tooltip ?? "", /another memoryd/);
    assert.equal(F.fake.statusItems[0]!.backgroundColor, undefined);
  });

  test("a team sync the daemon stopped reads stopped, with why, in the status bar and its tooltip", async () => {
    // bad_token: a token that is no usable token, so the folder never syncs; http_401: the
    // server refused the pull, so sync stopped. Both have a repo: they read "team synced".
    const refusing = http.createServer((_req, res) => {
      res.writeHead(401, { "content-type": "application/json" });
      res.end(JSON.stringify({ error: "unauthorized", message: "bad token" }));
    });
    await new Promise<void>((resolve) => refusing.listen(0, "127.0.0.1", resolve));
    const port = (refusing.address() as AddressInfo).port;
    const cases = [
      // the daemon's words (team.status.why), not a copy of them kept in the extension
      { code: "bad_token", team: { MEMORYD_TEAM_URL: "http://127.0.0.1:9", MEMORYD_TEAM_TOKEN: "not a token" }, why: "team sync is off for this folder (bad_token): MEMORYD_TEAM_TOKEN is not a usable token; fix it and restart memoryd" },
      { code: "http_401", team: { MEMORYD_TEAM_URL: `http://127.0.0.1:${port}`, MEMORYD_TEAM_TOKEN: "t-vscode-test" }, why: "team sync is stopped (http_401): the server refused a pull: MEMORYD_TEAM_TOKEN was not accepted (revoked, mistyped, or another server's); set a valid one (`memoryd-team token create --repo owner/repo`) and restart memoryd (or delete a file in team/ to try again)" },
    ];
    try {
      for (const { code, team, why } of cases) {
        const sock = path.join(tmp, `${code}.sock`);
        const repo = makeRepo(path.join(tmp, `stopped-${code}`), { remote: "git@github.com:acme/widgets.git" });
        const teamDaemon = await Daemon.start(sock, { ...env, ...team });
        try {
          activate(sock, [repo.root]);
          await up();
          const item = F.fake.statusItems[0]!;
          // Show Status asks again: the daemon stops a sync after its first answer (a 401)
          await waitFor(async () => (await run("memoryd.status", [undefined]), item.text.includes("team stopped") && item.text.includes("problem")), PATIENCE_MS, `${code}: the status bar to say stopped`);
          // (the refused pull is a worker error too, and the daemon lists the stop as a problem)
          assert.match(item.text, new RegExp(`^\\$\\(database\\) memoryd · no model · team stopped \\(${code}\\)( · 1 worker error)? · 1 problem$`));
          const line = item.tooltip!.split("\n").find((l) => l.startsWith("Team sync:")) ?? "";
          assert.ok(line.startsWith(`Team sync: acme/widgets via ${team.MEMORYD_TEAM_URL} — stopped: ${why}; `), item.tooltip);
          assert.equal(item.backgroundColor?.id, "statusBarItem.warningBackground");
          const said = await showStatus();
          assert.equal(said.level, "warning");
          assert.ok(said.text.includes(`stopped: ${why}`), said.text);
        } finally {
          await teamDaemon.stop();
        }
      }
    } finally {
      await new Promise((resolve) => refusing.close(resolve));
    }
  });

  test("the daemon's problems: a refused model key, a team URL without a token, broken user settings, in the status bar, its tooltip and Show Status", async () => {
    // Found by a bug hunt: the item read `memoryd · model claude-… · team off`, no warning.
    const refusing = http.createServer((_req, res) => {
      res.writeHead(401, { "content-type": "application/json" });
      res.end(JSON.stringify({ type: "error", error: { type: "authentication_error", message: "invalid x-api-key" } }));
    });
    await new Promise<void>((resolve) => refusing.listen(0, "127.0.0.1", resolve));
    const api = `http://127.0.0.1:${(refusing.address() as AddressInfo).port}`;
    const root = path.join(tmp, "problems");
    const badEnv = isolatedEnv(root, {
      MEMORYD_TEAM_URL: "http://127.0.0.1:9",
      ANTHROPIC_API_KEY: "sk-ant-vscode-test-key",
      ANTHROPIC_BASE_URL: api,
      MEMORYD_MODEL_RETRIES: "0",
    });
    const settings = path.join(badEnv.HOME!, ".claude", "settings.json");
    fs.mkdirSync(path.dirname(settings), { recursive: true });
    fs.writeFileSync(settings, '{"autoMemoryEnabled": tru');
    const sock = path.join(tmp, "problems.sock");
    let bad: Daemon | undefined;
    // the first recall imports the model's SDK: seconds on a busy machine
    const probe = new MemorydClient({ socketPath: sock, reconnect: false, timeoutMs: CALL_TIMEOUT_MS });
    try {
      bad = await Daemon.start(sock, badEnv); // in the try: a failed start closes `refusing`
      await probe.call("memory.write", { cwd: one.root, type: "user", name: "tabs", description: "t", body: "t" });
      // a recall whose model call outlives recall's deadline (a loaded machine) notes nothing
      await waitFor(
        async () => (await probe.call("recall", { cwd: one.root, query: "tabs or spaces" }), Boolean((await probe.call<StatusResult>("status")).model.problem)),
        PATIENCE_MS,
        "a model call to be refused",
      );
      activate(sock, [one.root]);
      await up();
      const item = F.fake.statusItems[0]!;
      await waitFor(async () => (await run("memoryd.status", [undefined]), item.text.includes("problems")), PATIENCE_MS, "the status bar to count the problems");
      assert.equal(item.text, "$(database) memoryd · model claude-sonnet-4-5 failing · team off · 3 problems");
      assert.equal(item.backgroundColor?.id, "statusBarItem.warningBackground");
      const tooltip = item.tooltip!.split("\n");
      const model = tooltip.find((l) => l.startsWith("Model: ")) ?? "";
      assert.ok(model.startsWith(`Model: claude-sonnet-4-5 — but the model key was refused: ${api} answered HTTP 401`), item.tooltip);
      const problems = tooltip.filter((l) => l.startsWith("Problem: "));
      assert.equal(problems.length, 2, item.tooltip);
      assert.ok(problems[0]!.startsWith("Problem: MEMORYD_TEAM_URL is set but MEMORYD_TEAM_TOKEN is not: create one with"), problems[0]);
      assert.ok(problems[1]!.startsWith(`Problem: user settings file ${settings}: invalid JSON`), problems[1]);
      const said = await showStatus();
      assert.equal(said.level, "warning");
      assert.ok(said.text.includes("the model key was refused") && said.text.includes("MEMORYD_TEAM_URL is set but"), said.text);
    } finally {
      probe.close();
      await bad?.stop();
      await new Promise((resolve) => refusing.close(resolve));
    }
  });

  test("problems are text on one line, never a link; a daemon older than them shows as before", async () => {
    const base = { version: "0.0.9", protocol_version: 1, pid: 1, uptime_s: 1, socket: "/s", worker_errors: {}, features: {} };
    const older = statusView({ ...base, model: { configured: true, reason: null, model: "m" } }, { kind: "unknown" });
    assert.equal(older.text, "$(database) memoryd · model m");
    assert.equal(older.warning, undefined);
    assert.doesNotMatch(older.tooltip, /Problem/);
    const reason = "ANTHROPIC_BASE_URL is not an http(s) URL with a host: 'x'";
    const view = statusView(
      { ...base, model: { configured: false, reason, problem: null }, problems: [reason, "see [fix](command:workbench.action.terminal.new)\nProblem: forged\u001b[2J", 7 as unknown as string] },
      { kind: "unknown" },
    );
    assert.equal(view.text, "$(database) memoryd · no model · 2 problems");
    assert.ok(view.warning);
    const lines = view.tooltip.split("\n");
    assert.deepEqual(lines.filter((l) => l.startsWith("Problem")), ["Problem: see [fix](command:workbench.action.terminal.new)\\nProblem: forged\\x1b[2J"]);
    assert.deepEqual(setupProblems({ model: base as never, problems: undefined }), []);
    assert.equal(modelProblem({ model: { configured: true, reason: null, problem: "p\tq" }, features: {} }), "p\\tq");
    // Show Status says the tooltip as a message, which VS Code would make links of
    assert.doesNotMatch(messageText(lines.join(" · ")), LINK);
  });

  test("thousands of problems: the tooltip and Show Status list the first 20 and how many more", () => {
    // An env file of 30,000 pasted shell lines is 30,000 problems: the tooltip had 30,000 lines.
    const many = Array.from({ length: 30_000 }, (_, n) => `~/.config/memoryd/env line ${n} is not a NAME=value line`);
    const base = { version: "9", protocol_version: 1, pid: 1, uptime_s: 1, socket: "/s", worker_errors: {}, features: {} };
    const view = statusView({ ...base, model: { configured: true, reason: null, model: "m" }, problems: many }, { kind: "unknown" });
    assert.equal(view.text, "$(database) memoryd · model m · 30000 problems");
    const shown = view.tooltip.split("\n").filter((l) => l.startsWith("Problem: "));
    assert.deepEqual(shown, [...many.slice(0, 20).map((p) => `Problem: ${p}`), "Problem: … and 29980 more (`memctl status --json` lists them all)"]);
  });

  test("the daemon's why is shown as sent; a daemon older than it gets the extension's words", () => {
    assert.equal(whyOff({ why: "team sync is off for this folder (no_repo): no remote\nhere; add one" }, "no_repo"), "team sync is off for this folder (no_repo): no remote\\nhere; add one");
    assert.equal(whyOff({}, "no_repo"), whySuppressed("no_repo"));
    assert.equal(whyOff({ why: "" }, "http_401"), whySuppressed("http_401"));
    const base = { version: "9", protocol_version: 1, pid: 1, uptime_s: 1, socket: "/s", worker_errors: {}, features: {}, model: { configured: false, reason: "no key" } };
    const stopped = { repo: "acme/widgets", server: "http://t", team_dir: "/t", last_result: null, suppressed: "http_403", pending: [], entries: 0, retrying: false };
    const said = (why?: string) => statusView(base, { kind: "on", status: { ...stopped, ...(why === undefined ? {} : { why }) } }).tooltip;
    assert.match(said("team sync is stopped (http_403): the server refused a push: bind it"), /— stopped: team sync is stopped \(http_403\): the server refused a push: bind it; not synced yet;/);
    assert.match(said(), /— stopped: the team server answered HTTP 403, so sync stopped \(http_403\)/);
  });

  test("a team.status the daemon refuses or fails is said in the tooltip, not taken for no project", async () => {
    // Found by a bug hunt: a daemon older than team.status (or failing it) read "unknown (no project open)".
    const refusing = { call: () => Promise.reject(new RpcError(-32601, "method not found: team.status")) } as unknown as MemorydClient;
    const base = { version: "9", protocol_version: 1, pid: 1, uptime_s: 1, socket: "/s", worker_errors: {}, features: {}, model: { configured: false, reason: "no key" } };
    const line = async (cwd: string | undefined) => statusView(base, await teamState(refusing, cwd)).tooltip.split("\n").find((l) => l.startsWith("Team sync:"));
    assert.equal(await line("/p"), "Team sync: unknown — method not found: team.status (the running memoryd may be older than this extension, started before an upgrade: `memctl restart` runs the installed one)");
    assert.equal(await line(undefined), "Team sync: unknown (no project open)");
  });

  test("each team.status suppressed code in words, as Neovim and the daemon say it", () => {
    assert.equal(whySuppressed("no_repo"), "the project has no git remote naming its owner/repo, which team memory is keyed by (no_repo); add one");
    assert.equal(whySuppressed("no_oauth"), "MEMORYD_TEAM_TOKEN is not set (no_oauth); fix it and restart memoryd");
    assert.equal(whySuppressed("bad_url"), "MEMORYD_TEAM_URL is not an http(s) URL (bad_url); fix it and restart memoryd");
    assert.match(whySuppressed("http_403"), /^the team server answered HTTP 403, so sync stopped \(http_403\); delete a file in team\//);
    assert.match(whySuppressed("permanent"), /^the team server refused for good, so sync stopped \(permanent\)/);
    assert.match(whySuppressed("toString"), /^the team server refused for good, so sync stopped \(toString\)/);
    assert.match(whySuppressed("odd\ncode"), /\(odd\\ncode\)/, "one line");
  });

  test("the other daemon's socket is quoted for a shell as memctl quotes it", () => {
    assert.equal(shellQuote("/run/user/1000/memoryd/memoryd.sock"), "/run/user/1000/memoryd/memoryd.sock");
    assert.equal(shellQuote("/tmp/a b/it's.sock"), `'/tmp/a b/it'"'"'s.sock'`);
    assert.equal(shellQuote(""), "''");
    assert.equal(otherDaemonWarning({ other_daemon: { pid: null, socket: null } }), "another memoryd of this user (pid unknown) is running");
    // a control character in the path: escaped, the line stays one line
    assert.equal(otherDaemonWarning({ other_daemon: { pid: 7, socket: "/s\nx" } }), "another memoryd of this user (pid 7) is running on /s\\nx; keep one: memctl --socket '/s\\nx' stop");
    assert.equal(otherDaemonWarning({ other_daemon: null }), undefined);
    assert.equal(otherDaemonWarning({}), undefined);
  });

  test("deactivating closes its connection and unregisters everything", async () => {
    // Sockets and pipes open in this process (the daemon's stderr, stand-ins of tests before):
    // what the extension leaves open after deactivating is counted against them.
    const pipes = (): number => process.getActiveResourcesInfo().filter((r) => r === "PipeWrap").length;
    const pipesBefore = pipes();
    activate(socketPath, [one.root]);
    await up();
    for (const d of active!.subscriptions) {
      d.dispose();
    }
    extension.deactivate();
    active = undefined;
    assert.ok(F.fake.statusItems[0]!.disposed);
    assert.equal(F.fake.commands.size, 0, "commands unregistered");
    assert.equal(F.fake.trees.size, 0, "views unregistered");
    const probe = new MemorydClient({ socketPath, reconnect: false, timeoutMs: CALL_TIMEOUT_MS });
    try {
      // (seen once on a loaded machine: a second connection still counted after 60 s; the
      // daemon's counts are kept for the next look. Pipes open here beyond the probe's: the
      // extension left a socket open; none, and inflight over the probe's own status: the
      // daemon counts a closed connection until a request it carried is done.)
      let seen: { connections: number; inflight?: number; workers_running?: number; counters?: unknown } | undefined;
      await waitFor(async () => (seen = await probe.call<{ connections: number }>("status")).connections === 1, PATIENCE_MS, "only the probe connected").catch((error: unknown) => {
        const last = { connections: seen?.connections, inflight: seen?.inflight, workers_running: seen?.workers_running, counters: seen?.counters };
        throw new Error(`${String(error)}; the daemon's last status: ${JSON.stringify(last)}; pipes open here: ${pipes()}, ${pipesBefore} before activating and 1 the probe's`);
      });
    } finally {
      probe.close();
    }
  });

  test("a rule written by another program refreshes the Rules view (context/changed)", async () => {
    activate(socketPath, [one.root]);
    await up();
    let refreshed = 0;
    (F.fake.trees.get("memoryd.rulesView")!.onDidChangeTreeData as (l: () => void) => unknown)(() => refreshed++);
    F.openEditor(F.Uri.file(one.apiFile));
    await waitFor(() => refreshed > 0, PATIENCE_MS, "the refresh for the editor opened"); // not counted below
    await F.viewText("memoryd.rulesView"); // loads the project in the daemon
    const probe = new MemorydClient({ socketPath, timeoutMs: CALL_TIMEOUT_MS });
    const outside = path.join(one.root, ".claude", "rules", "from_outside.md");
    try {
      // Until the daemon's file watcher covers what the view loaded (then it sees edits).
      await waitFor(async () => {
        const status = await probe.call<{ features: { instruction_files: { trusted: number } } }>("status");
        return status.features.instruction_files.trusted > 0;
      }, PATIENCE_MS, "the watcher to cover the load");
      refreshed = 0;
      fs.writeFileSync(outside, "Written by another program.\n"); // no save in the editor
      await waitFor(() => refreshed > 0, PATIENCE_MS, "the Rules view to refresh");
      // A refresh of something else (a watcher's lost events) may come before the daemon has
      // read the new rule: what the view shows is waited for, not taken at the first refresh.
      await waitFor(async () => (await F.viewText("memoryd.rulesView")).some((l) => l.includes("from_outside.md")), PATIENCE_MS, "the new rule in the Rules view");
    } finally {
      probe.close();
      fs.rmSync(outside, { force: true });
    }
  });

  test("a context/changed of another project leaves the views alone", () => {
    const target = { cwd: path.join(one.root, "src", "api"), touchedPaths: [], root: one.root };
    assert.equal(concernsTarget(one.root, target), true);
    assert.equal(concernsTarget(two.root, target), false);
    assert.equal(concernsTarget(`${one.root}-other`, target), false, "a sibling with the same start");
    assert.equal(concernsTarget("/", target), true);
    assert.equal(concernsTarget(undefined, target), false);
    const linked = { cwd: "/link/to/one/src", touchedPaths: [] };
    assert.equal(concernsTarget(one.root, linked, () => path.join(one.root, "src")), true, "a folder reached through a link");
    assert.equal(concernsTarget(one.root, linked, () => { throw new Error("ENOENT"); }), false);
  });

  test("a daemon older than context/changed is asked for the events it knows", async () => {
    const sock = path.join(tmp, "before-context.sock");
    const asked: string[][] = [];
    const server = await fakeServer(sock, (line, s) => {
      const request = JSON.parse(line) as { id: number; method: string; params?: { events?: string[] } };
      const reply = (body: Record<string, unknown>) => s.write(JSON.stringify({ jsonrpc: "2.0", id: request.id, ...body }) + "\n");
      if (request.method !== "subscribe") {
        reply({ error: { code: -32601, message: `method not found: ${request.method}` } });
        return;
      }
      const events = request.params?.events ?? [];
      asked.push(events);
      if (events.includes("context/changed")) {
        const known = "magicdoc/updated, memory/saved, session/summary_updated, team/conflict, team/secret_blocked, team/synced, worker/error";
        reply({ error: { code: -32602, message: `events: unknown event(s) context/changed; known: ${known}` } });
      } else {
        reply({ result: { subscribed: [...events].sort() } });
      }
    });
    try {
      activate(sock, [one.root]);
      await waitFor(() => asked.some((events) => !events.includes("context/changed")), PATIENCE_MS, "a subscription it accepts");
      const accepted = asked.find((events) => !events.includes("context/changed"))!;
      assert.deepEqual(accepted, EVENTS.filter((e) => e !== "context/changed"));
      assert.ok(!F.fake.shown.some((m) => m.level !== "info"), JSON.stringify(F.fake.shown));
    } finally {
      await server.close();
    }
  });

  test("connect() refreshes the status bar and the views itself, not only on the connection's state change", async () => {
    // 5a6bba3: since 3bb4a7e these two calls sat after a return in concernsViews and never ran.
    // The first connection's state change refreshes too (status twice: its own call and its
    // refreshAll's), so connect()'s own refresh is the third and fourth `status`.
    const sock = path.join(tmp, "connect-refresh.sock");
    const asked: string[] = [];
    const server = await fakeServer(sock, (line, s) => {
      const request = JSON.parse(line) as { id: number; method: string };
      asked.push(request.method);
      const reply = (body: Record<string, unknown>) => s.write(JSON.stringify({ jsonrpc: "2.0", id: request.id, ...body }) + "\n");
      if (request.method === "subscribe") {
        reply({ result: { subscribed: [] } });
      } else if (request.method === "status") {
        reply({ result: { version: "9", protocol_version: 1, pid: 1, uptime_s: 1, socket: sock, worker_errors: {}, features: {}, model: { configured: false, reason: "no key" } } });
      } else {
        reply({ error: { code: -32601, message: `method not found: ${request.method}` } });
      }
    });
    try {
      activate(sock, [one.root]);
      await up();
      await waitFor(() => asked.filter((m) => m === "status").length >= 4, PATIENCE_MS, "connect()'s own refresh of the status bar");
    } finally {
      await server.close();
    }
  });

  test("a steady stream of memory/saved refreshes the views while it lasts, not only after", async () => {
    // Each one pushed a 300 ms debounce back: saves 100 ms apart held the views until they stopped.
    const sock = path.join(tmp, "stream.sock");
    let subscriber: import("node:net").Socket | undefined;
    const server = await fakeServer(sock, (line, s) => {
      const request = JSON.parse(line) as { id: number; method: string };
      const reply = (body: Record<string, unknown>) => s.write(JSON.stringify({ jsonrpc: "2.0", id: request.id, ...body }) + "\n");
      if (request.method === "subscribe") {
        subscriber = s;
        reply({ result: { subscribed: EVENTS } });
      } else if (request.method === "status") {
        reply({ result: { version: "9", protocol_version: 1, pid: 1, uptime_s: 1, socket: sock, worker_errors: {}, features: {}, model: { configured: false, reason: "no key" } } });
      } else {
        reply({ error: { code: -32601, message: `method not found: ${request.method}` } });
      }
    });
    try {
      activate(sock, [one.root], { "memoryd.showNotifications": false });
      await up();
      await waitFor(() => subscriber !== undefined, PATIENCE_MS, "the subscription");
      await sleep(500); // the refreshes of the connection itself are over
      let refreshed = 0;
      (F.fake.trees.get("memoryd.rulesView")!.onDidChangeTreeData as (l: () => void) => unknown)(() => refreshed++);
      let duringStream = 0;
      for (let i = 0; i < 30; i++) {
        const note = { jsonrpc: "2.0", method: "memory/saved", params: { path: path.join(one.root, `m${i}.md`), name: `m${i}`, by: "extraction" } };
        subscriber!.write(JSON.stringify(note) + "\n");
        await sleep(100);
        duringStream = refreshed;
      }
      assert.ok(duringStream > 0, "the Rules view refreshed while the saves kept coming");
    } finally {
      await server.close();
    }
  });

  test("an older status answer that comes after a newer one is not shown", async () => {
    const sock = path.join(tmp, "late-status.sock");
    let statuses = 0;
    let lateSent = false;
    const server = await fakeServer(sock, (line, s) => {
      const request = JSON.parse(line) as { id: number; method: string };
      const reply = (body: Record<string, unknown>) => s.write(JSON.stringify({ jsonrpc: "2.0", id: request.id, ...body }) + "\n");
      const status = (version: string) => ({ result: { version, protocol_version: 1, pid: 1, uptime_s: 1, socket: sock, worker_errors: {}, features: {}, model: { configured: false, reason: "no key" } } });
      if (request.method === "subscribe") {
        reply({ result: { subscribed: EVENTS } });
      } else if (request.method === "status") {
        if (++statuses === 1) {
          setTimeout(() => {
            reply(status("old"));
            lateSent = true;
          }, 1500);
        } else {
          reply(status("new"));
        }
      } else {
        reply({ error: { code: -32601, message: `method not found: ${request.method}` } });
      }
    });
    try {
      activate(sock, [one.root]);
      const tooltip = () => String(F.fake.statusItems[0]?.tooltip ?? "");
      await waitFor(() => tooltip().startsWith("memoryd new"), PATIENCE_MS, "the newer answer shown");
      await waitFor(() => lateSent, PATIENCE_MS, "the older answer sent");
      await sleep(300);
      assert.match(tooltip(), /^memoryd new/, "the older answer was dropped");
    } finally {
      await server.close();
    }
  });

  test("a status call that a setting change's new connection failed does not show the daemon down", async () => {
    // The close of the old connection fails its calls in flight: a status asked just before
    // read "memoryd down" (warning colour and all) until the new connection's answer came.
    const sock = path.join(tmp, "reconnect-status.sock");
    let hold = false;
    const held: Array<() => void> = [];
    const server = await fakeServer(sock, (line, s) => {
      const request = JSON.parse(line) as { id: number; method: string };
      const reply = (body: Record<string, unknown>) => s.write(JSON.stringify({ jsonrpc: "2.0", id: request.id, ...body }) + "\n");
      if (request.method === "subscribe") {
        reply({ result: { subscribed: EVENTS } });
      } else if (request.method === "status") {
        const answer = () => reply({ result: { version: "9", protocol_version: 1, pid: 1, uptime_s: 1, socket: sock, worker_errors: {}, features: {}, model: { configured: false, reason: "no key" } } });
        if (hold) {
          held.push(answer); // answered when the test says
        } else {
          answer();
        }
      } else {
        reply({ error: { code: -32601, message: `method not found: ${request.method}` } });
      }
    });
    try {
      activate(sock, [one.root]);
      await up();
      hold = true;
      await F.fake.commands.get("memoryd.refresh")!(); // a status asked on this connection
      await waitFor(() => held.length >= 1, PATIENCE_MS, "the status asked");
      const before = held.length;
      F.setConfig({ "memoryd.requestTimeoutMs": CALL_TIMEOUT_MS + 1 }); // a new connection
      // the new connection asks too: the old one's failed call has been dealt with by then
      await waitFor(() => held.length > before, PATIENCE_MS, "the new connection's status asked");
      const item = F.fake.statusItems[0]!;
      assert.match(item.text, /^\$\(database\) memoryd · /, `shown: ${item.text} — ${item.tooltip}`);
      assert.equal(item.backgroundColor, undefined);
      for (const answer of held.splice(0)) {
        answer();
      }
    } finally {
      await server.close();
    }
  });

  test("a daemon stopping as the extension connects (-32006 to each request) is a reconnect: nothing said", async () => {
    // Found by a bug hunt: since session 23 a connection accepted as the daemon stops gets
    // -32006 on each request for 5 s, where it was closed; the extension warned "could not
    // subscribe to notifications: memoryd is stopping…" and showed the views' calls failing.
    // Here the first connection is the stopping daemon's; later ones reach the real daemon.
    const sock = path.join(tmp, "stopping.sock");
    const sockets = new Set<net.Socket>();
    let accepted = 0;
    let firstClosed = false;
    let stoppingAnswers = 0;
    let subscribes = 0; // on the connections after the first
    const server = net.createServer((s) => {
      sockets.add(s);
      s.on("error", () => undefined);
      const first = accepted++ === 0;
      let buffered = "";
      s.on("data", (chunk: Buffer) => {
        buffered += chunk.toString("utf8");
        let nl: number;
        while ((nl = buffered.indexOf("\n")) !== -1) {
          const request = JSON.parse(buffered.slice(0, nl)) as { id?: number; method: string };
          buffered = buffered.slice(nl + 1);
          subscribes += !first && request.method === "subscribe" ? 1 : 0;
          if (first && request.id !== undefined) {
            stoppingAnswers++;
            s.write(stoppingReply(request.id));
          }
        }
      });
      if (first) {
        s.on("close", () => (firstClosed = true));
        return;
      }
      const next = net.createConnection({ path: socketPath }); // the next daemon
      sockets.add(next);
      next.on("error", () => undefined);
      next.on("close", () => s.destroy());
      s.on("close", () => next.destroy());
      s.pipe(next);
      next.pipe(s);
    });
    await new Promise<void>((resolve) => server.listen(sock, resolve));
    try {
      activate(sock, [one.root]);
      await up();
      await waitFor(() => firstClosed, PATIENCE_MS, "the stopping daemon's connection closed by the extension");
      assert.ok(stoppingAnswers >= 1);
      F.openEditor(F.Uri.file(one.apiFile), "def users():");
      assert.match((await F.viewText("memoryd.rulesView")).join("\n"), /api\.md/, "the rules come from the next daemon");
      assert.deepEqual((await showStatus()).items, ["Refresh"]);
      assert.deepEqual(F.fake.shown.filter((m) => m.level !== "info"), [], "no warning, no error");
      assert.equal(subscribes, 1, "subscribed once on the new connection");
    } finally {
      for (const s of sockets) {
        s.destroy();
      }
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });

  test("a subscribe answered -32006 on the new connection too is no warning: it is asked again as the client reconnects", async () => {
    const sock = path.join(tmp, "always-stopping.sock");
    let subscribes = 0;
    const server = await fakeServer(sock, (line, s) => {
      const request = JSON.parse(line) as { id: number; method: string };
      subscribes += request.method === "subscribe" ? 1 : 0;
      s.write(stoppingReply(request.id));
    });
    try {
      activate(sock, [one.root]);
      // the first, its one retry on a new connection, then the reconnect's: the retry's answer
      // was handled long before
      await waitFor(() => subscribes >= 3, PATIENCE_MS, "a reconnect to subscribe again");
      assert.deepEqual(F.fake.shown.filter((m) => /subscribe/.test(m.text)), [], "nothing said of the subscription");
    } finally {
      await server.close();
    }
  });

  test("a subscribe the daemon refuses otherwise is said, as Neovim says it", async () => {
    // Found by a bug hunt: the refusal was swallowed; no notification came and nothing said why.
    const sock = path.join(tmp, "refusing-subscribe.sock");
    const server = await fakeServer(sock, (line, s) => {
      const request = JSON.parse(line) as { id: number; method: string };
      const error = request.method === "subscribe" ? { code: -32602, message: "invalid params: events: List should have at most 100 items" } : { code: -32601, message: `method not found: ${request.method}` };
      s.write(JSON.stringify({ jsonrpc: "2.0", id: request.id, error }) + "\n");
    });
    try {
      activate(sock, [one.root]);
      const said = "memoryd: could not subscribe to notifications: invalid params: events: List should have at most 100 items";
      await waitFor(() => F.fake.shown.some((m) => m.level === "warning" && m.text.startsWith(said)), PATIENCE_MS, "the refusal said");
    } finally {
      await server.close();
    }
  });
});

describe("asField", () => {
  test("is memoryd's memfile.as_field: runs of any space Python splits on are one space", () => {
    // Before, each control became a space and runs stayed runs: "a\t\tb" was "a  b" where
    // memoryd's own derived field is "a b".
    assert.equal(asField("a\t\tb"), "a b");
    assert.equal(asField("\u00a0\u00a0x\u3000\u2003y\u202f"), "x y");
    assert.equal(asField("a\u202eb\u2066c"), "abc");
    assert.equal(asField("a\x1b[31mb"), "a [31mb");
    assert.equal(asField("\ufeffa"), "\ufeffa"); // Python's split keeps U+FEFF
    assert.equal(asField(" \u0085 "), "");
  });
});
