// Every command's logic against the real daemon: rules in effect (types, @include tree,
// conditional rules matched and skipped, a rule edited on disk), recall, remember, the memory list
// with delete/history/restore, the status line, notifications; paths with spaces and unicode,
// no active file, a folder that is not a git repository.
import * as assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { after, before, describe, test } from "node:test";

import { NoProjectError, projectTarget } from "../src/core/editorContext";
import { shortPath } from "../src/core/format";
import {
  deleteMemory,
  historyPicks,
  inMemoryDir,
  listMemories,
  memoriesTree,
  MemoryDirs,
  memoryHistory,
  readMemory,
  reconcileSaved,
  restoreMemory,
  snapshotBeforeSave,
} from "../src/core/memories";
import { NotificationPresenter, type Message } from "../src/core/notifications";
import { defaultQuery, emptyRecallMessage, recall, recallDocument, recallParams, recallPicks, whyText } from "../src/core/recall";
import { MEMORY_TYPES, remember, savedMessage, suggestedName, teamSync, writeParams } from "../src/core/remember";
import { getContext, rulesTree, watchedFiles } from "../src/core/rules";
import { MemorydClient } from "../src/core/rpcClient";
import { downView, fetchStatus } from "../src/core/status";
import { findNode, renderTree } from "../src/core/viewNode";
import { CALL_TIMEOUT_MS, PATIENCE_MS, Daemon, cleanup, isolatedEnv, makeRepo, tempDir, waitFor } from "./helpers";

const tmp = tempDir();
const env = isolatedEnv(tmp);
const socketPath = path.join(tmp, "c.sock");
const repo = makeRepo(path.join(tmp, "widgets"));
let daemon: Daemon;
let client: MemorydClient;

before(async () => {
  daemon = await Daemon.start(socketPath, env);
  client = new MemorydClient({ socketPath, timeoutMs: CALL_TIMEOUT_MS });
});
after(async () => {
  client.close();
  await daemon.stop();
  cleanup(tmp);
});

describe("rules in effect", () => {
  test("a file under src/api: CLAUDE.md, its @include nested under it, the conditional rule matched", async () => {
    const target = projectTarget({ filePath: repo.apiFile, workspaceFolder: repo.root });
    assert.deepEqual(target, { cwd: path.dirname(repo.apiFile), touchedPaths: [repo.apiFile], root: repo.root });
    const ctx = await getContext(client, target);
    const tree = rulesTree(ctx, target);
    const text = renderTree(tree).join("\n");
    assert.match(text, /▾ Project/);
    const claude = findNode(tree, (n) => n.path === repo.claudeMd);
    assert.ok(claude, text);
    assert.equal(claude.description, "Project · always loaded");
    assert.deepEqual(claude.children?.map((c) => c.path), [repo.style], "the @include sits under its includer");
    assert.equal(claude.children?.[0]?.description, "Project · @include from CLAUDE.md");
    const api = findNode(tree, (n) => n.path === repo.apiRule);
    assert.ok(api, text);
    assert.equal(api.description, "Project · paths: src/api/** matched src/api/users.py");
    assert.equal(findNode(tree, (n) => n.id === "skipped"), undefined);
  });

  test("a file elsewhere: the conditional rule is listed as skipped, with the daemon's reason", async () => {
    const target = projectTarget({ filePath: repo.readme });
    const tree = rulesTree(await getContext(client, target), target);
    const skipped = findNode(tree, (n) => n.id === "skipped");
    assert.ok(skipped);
    const rule = skipped.children?.find((c) => c.path === repo.apiRule);
    assert.ok(rule, renderTree(tree).join("\n"));
    assert.equal(rule.description, "conditional rule, no path matched");
    assert.match(rule.tooltip ?? "", /no touched path matches \['src\/api\/\*\*'\]/);
  });

  test("missing and outside includes are skipped with their reasons", async () => {
    const root = path.join(tmp, "gaps");
    const gaps = makeRepo(root);
    fs.appendFileSync(gaps.claudeMd, "\n@docs/missing.md\n@/etc/hostname\n");
    const target = projectTarget({ filePath: gaps.readme });
    const tree = rulesTree(await getContext(client, target), target);
    const skipped = findNode(tree, (n) => n.id === "skipped");
    const reasons = Object.fromEntries((skipped?.children ?? []).map((c) => [c.label, c.description]));
    assert.equal(reasons["docs/missing.md"], "missing");
    assert.equal(reasons["/etc/hostname"], "outside the project (not approved)");
    assert.equal(findNode(tree, (n) => n.label === "docs/missing.md")?.path, undefined, "nothing to open");
  });

  test("editing and saving a rule file changes the result without a restart", async () => {
    const root = path.join(tmp, "edited");
    const edited = makeRepo(root);
    const target = projectTarget({ filePath: edited.apiFile });
    const first = await getContext(client, target);
    assert.ok(watchedFiles(first).has(edited.apiRule));
    fs.writeFileSync(edited.apiRule, '---\npaths:\n  - "lib/**"\n---\nOnly for lib.\n');
    fs.writeFileSync(path.join(root, "docs", "extra.md"), "More rules.\n");
    fs.appendFileSync(edited.claudeMd, "@docs/extra.md\n");
    await waitFor(async () => {
      const ctx = await getContext(client, target);
      const tree = rulesTree(ctx, target);
      const rule = findNode(findNode(tree, (n) => n.id === "skipped")?.children ?? [], (n) => n.path === edited.apiRule);
      const extra = findNode(tree, (n) => n.path === path.join(root, "docs", "extra.md"));
      return !!rule && !!extra;
    }, PATIENCE_MS, "the edited rule to be reflected");
  });

  test("a path with spaces and unicode", async () => {
    const root = path.join(tmp, "my prøject ✓");
    const odd = makeRepo(root, { apiFileName: "naïve handler (v2).py" });
    const target = projectTarget({ filePath: odd.apiFile });
    assert.equal(target.root, root);
    const tree = rulesTree(await getContext(client, target), target);
    const api = findNode(tree, (n) => n.path === odd.apiRule);
    assert.ok(api, renderTree(tree).join("\n"));
    assert.equal(api.description, "Project · paths: src/api/** matched src/api/naïve handler (v2).py");
    assert.ok(findNode(tree, (n) => n.path === odd.claudeMd));
  });

  test("no active file: the workspace folder; no folder either: a clear error", async () => {
    const target = projectTarget({ filePath: undefined, workspaceFolder: repo.root });
    assert.deepEqual(target, { cwd: repo.root, touchedPaths: [], root: repo.root });
    const tree = rulesTree(await getContext(client, target), target);
    assert.ok(findNode(tree, (n) => n.path === repo.claudeMd));
    assert.throws(() => projectTarget({}), NoProjectError);
    assert.throws(() => projectTarget({ filePath: "Untitled-1" }), /open a file that is saved on disk, or open a folder/);
  });

  test("a folder that is not a git repository is its own project", async () => {
    const root = path.join(tmp, "plain");
    const plain = makeRepo(root, { git: false });
    const target = projectTarget({ filePath: plain.apiFile, workspaceFolder: root });
    assert.equal(target.root, root, "no git: the workspace folder");
    const tree = rulesTree(await getContext(client, target), target);
    assert.equal(findNode(tree, (n) => n.path === plain.claudeMd)?.label, "CLAUDE.md", renderTree(tree).join("\n"));
    assert.equal(findNode(tree, (n) => n.path === plain.apiRule)?.description, "Project · paths: src/api/** matched src/api/users.py");
    const empty = path.join(tmp, "empty folder");
    fs.mkdirSync(empty);
    const none = rulesTree(await getContext(client, { cwd: empty, touchedPaths: [] }), { cwd: empty, touchedPaths: [] });
    assert.equal(none[0]?.label, "No instruction files apply here");
  });
});

describe("paths shown short", () => {
  test("a folder whose name begins with two dots is below the project, not above it", () => {
    // Found by session 22's hunt: `..notes/CLAUDE.md` was read as `../`, a path outside, so
    // it was shown whole and a file in `..notes` was shown from its own folder.
    const root = path.join(tmp, "dots");
    const notes = path.join(root, "..notes");
    fs.mkdirSync(notes, { recursive: true });
    fs.writeFileSync(path.join(notes, "todo.md"), "x\n");
    assert.equal(projectTarget({ filePath: path.join(notes, "todo.md"), workspaceFolder: root }).root, root);
    assert.equal(shortPath(path.join(notes, "CLAUDE.md"), root), "..notes/CLAUDE.md");
    assert.equal(shortPath(path.join(root, "..", "other", "CLAUDE.md"), root), path.join(tmp, "other", "CLAUDE.md"));
    assert.equal(shortPath(root, root), root);
  });
});

describe("remember, recall, the memory list", () => {
  const target = { cwd: repo.root, touchedPaths: [] };

  test("remember: type picker values, a name from the first line, no team without team sync", async () => {
    assert.deepEqual(MEMORY_TYPES.map((t) => t.type), ["user", "feedback", "project", "reference"]);
    assert.equal(suggestedName("\n# Deploys happen on Thursdays\nafter QA"), "Deploys happen on Thursdays");
    assert.throws(() => writeParams(target, { type: "project", text: "   " }), /nothing to remember/);
    assert.equal(await teamSync(client, target), null);
    const result = await remember(client, target, { type: "project", text: "Deploys happen on Thursdays after the QA sign-off." });
    assert.equal(result.created, true);
    assert.match(savedMessage(result, false), /^Saved memory .*project_.*\.md$/);
    const read = await readMemory(client, target, result.path);
    assert.match(read.content, /type: project/);
    assert.match(read.content, /Deploys happen on Thursdays after the QA sign-off\./);
    assert.deepEqual(writeParams(target, { type: "reference", text: "Runbook: wiki Ops/On-call", team: true }).team, true);
  });

  test("recall: default query from the selection or word, up to 5 with name, type, age", async () => {
    assert.equal(defaultQuery("  release\n dates ", "word"), "release dates");
    assert.equal(defaultQuery("", "deploys"), "deploys");
    assert.throws(() => recallParams(target, " "), /nothing to recall/);
    for (let i = 0; i < 7; i++) {
      await remember(client, target, { type: "reference", name: `Deploy dashboard ${i}`, text: `Deploy dashboard number ${i} lives at grafana/d/${i}` });
    }
    const result = await recall(client, target, "deploy dashboard", { selector: "local" });
    assert.ok(result.memories.length > 0 && result.memories.length <= 5, `${result.memories.length}`);
    const picks = recallPicks(result);
    assert.match(picks[0]!.label, /Deploy dashboard/);
    // type · age, then what the local ranker saw in it (`explain`)
    // (it names no date: it is dated by its file's last write, today)
    assert.match(picks[0]!.description, /^reference · now · words deploy, dashboard · date \d{4}-\d\d-\d\d \(file time\) · lexical 1\.00$/);
    assert.match(recallDocument(result.memories[0]!), /^---\nname: Deploy dashboard/);
    assert.equal(
      whyText({ words: ["hiking"], feedback_terms: ["trail"], date: "2023-08-20", date_signals: ["dated as asked"], lexical: 0.5 }),
      "words hiking · feedback trail · date 2023-08-20 (dated as asked) · lexical 0.50",
    );
    assert.equal(whyText({ words: [], date: "2022-01-09", lexical: 1 }), "words none · date 2022-01-09 · lexical 1.00");
    assert.equal(
      whyText({ words: [], date: "2026-12-02", date_from: "file", date_signals: ["dated as asked"], lexical: 0 }),
      "words none · date 2026-12-02 (file time, dated as asked) · lexical 0.00",
    );
    const { why: _why, ...unexplained } = result.memories[0]!;
    const stale = recallPicks({ selector: "local", memories: [{ ...unexplained, mtime: Date.now() / 1000 - 3 * 86400, stale: true, note: "This memory is 3 days old." }] });
    assert.equal(stale[0]!.description, "reference · 3d · stale");
    assert.equal(stale[0]!.detail, "⚠ This memory is 3 days old.");
    // A reply that names no topic is not ranked, and the message says why.
    const none = await recall(client, target, "looks good, keep going", { selector: "local" });
    assert.equal(none.memories.length, 0);
    assert.match(emptyRecallMessage(none, "looks good, keep going"), /^memoryd: not ranked: the query names no topic/);
    assert.equal(emptyRecallMessage({ selector: "local", memories: [] }, "x"), 'memoryd: no memory about "x"');
  });

  test("memory list grouped by type, newest first; delete, history and restore", async () => {
    const saved = await remember(client, target, { type: "feedback", name: "Tabs in Go", text: "Indent Go with tabs." });
    await client.call("memory.write", { cwd: repo.root, type: "feedback", name: "Tabs in Go", description: "tabs", body: "Indent Go with tabs, always.", file: path.basename(saved.path) });
    const list = await listMemories(client, target);
    const tree = memoriesTree(list, target, Date.now(), env.HOME);
    const text = renderTree(tree).join("\n");
    const memories = findNode(tree, (n) => n.id === "memories");
    assert.deepEqual(memories?.children?.map((g) => g.label), ["feedback", "project", "reference"], text);
    assert.equal(findNode(tree, (n) => n.id === "type:reference")?.children?.[0]?.label, "Deploy dashboard 6", "newest first");
    const instructions = findNode(tree, (n) => n.id === "instructions");
    assert.ok(findNode(instructions?.children ?? [], (n) => n.path === repo.claudeMd), text);
    assert.equal(inMemoryDir(saved.path, [list.memory_dir]), list.memory_dir);
    assert.equal(inMemoryDir(repo.claudeMd, [list.memory_dir]), undefined);

    const history = await memoryHistory(client, target, saved.path);
    const picks = historyPicks(history);
    assert.ok(picks.length >= 1);
    assert.match(picks[0]!.description, /bytes · overwrite/);
    await restoreMemory(client, target, saved.path, picks[0]!.version);
    assert.doesNotMatch((await readMemory(client, target, saved.path)).content, /always/);

    assert.deepEqual(await deleteMemory(client, target, saved.path), { deleted: true, path: saved.path });
    const after = memoriesTree(await listMemories(client, target), target);
    assert.equal(findNode(after, (n) => n.path === saved.path), undefined);
    assert.ok((await memoryHistory(client, target, saved.path)).versions.length >= 1, "a deleted memory keeps its history");
  });

  test("a memory file saved by hand is reconciled in the project its folder was listed for", async () => {
    // The Memories view listed the memories of the file being edited (a file under src/api).
    const editing = projectTarget({ filePath: repo.apiFile, workspaceFolder: repo.root });
    const list = await listMemories(client, editing);
    const dirs = new MemoryDirs();
    dirs.add(list, editing);
    // The user writes a memory file in that folder and saves it (the active editor is now the
    // memory file, whose folder is no project: reconciling there left MEMORY.md as it was).
    const file = path.join(list.memory_dir, "project_freeze.md");
    fs.mkdirSync(list.memory_dir, { recursive: true });
    fs.writeFileSync(file, "---\nname: Freeze\ndescription: no merges after March 5\ntype: project\n---\nNo merges after March 5.\n");
    assert.equal(dirs.projectOf(file), editing.cwd);
    assert.equal(dirs.projectOf(repo.claudeMd), undefined);
    assert.equal(await reconcileSaved(client, repo.claudeMd, dirs), undefined, "not a memory file: nothing to do");
    const result = await reconcileSaved(client, file, dirs);
    assert.equal(result?.added, 1);
    assert.match(fs.readFileSync(path.join(list.memory_dir, "MEMORY.md"), "utf8"), /project_freeze\.md/);
  });

  test("a save's snapshot of a file that cannot be reached resolves (nothing to keep), never rejects", async () => {
    // Its lstat threw (ELOOP) and the will-save promise rejected: VS Code logs that and drops
    // the listener's warning; a file that does not exist has nothing to keep either.
    const list = await listMemories(client, target);
    const dirs = new MemoryDirs();
    dirs.add(list, target);
    const loop = path.join(list.memory_dir, "loop");
    fs.mkdirSync(list.memory_dir, { recursive: true });
    fs.symlinkSync("loop", loop);
    try {
      assert.equal(dirs.projectOf(path.join(loop, "x.md")), target.cwd, "a file of the listed folder");
      assert.equal(await snapshotBeforeSave(client, path.join(loop, "x.md"), dirs), undefined);
      assert.equal(await snapshotBeforeSave(client, path.join(list.memory_dir, "not_yet.md"), dirs), undefined);
    } finally {
      fs.unlinkSync(loop);
    }
  });

  test("a suggested name, a description or a default query is never cut inside an emoji", async () => {
    const text = "Release checklist for the mobile app: run the smoke tests 🚀 then tag and publish to both stores";
    const name = suggestedName(text);
    assert.equal(name, "Release checklist for the mobile app: run the smoke tests 🚀…");
    const emojiAtCut = `${"x".repeat(58)}🚀 and more`;
    assert.equal(suggestedName(emojiAtCut), `${"x".repeat(58)}🚀…`, "59 characters, the emoji whole");
    assert.equal(suggestedName(`${"x".repeat(60)}🚀`), `${"x".repeat(59)}…`);
    const params = writeParams(target, { type: "project", text: `${"d".repeat(148)}🚀🚀🚀` });
    assert.equal(params.description, `${"d".repeat(148)}🚀…`);
    assert.equal(defaultQuery(`${"q".repeat(499)}🚀🚀`, undefined), `${"q".repeat(499)}🚀`);
    for (const value of [name, suggestedName(emojiAtCut), params.description as string, defaultQuery(`${"q".repeat(499)}🚀🚀`, undefined)]) {
      assert.doesNotMatch(value, /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/, "no lone surrogate");
    }
    // A first line holding what memory.write refuses in a field (an escape sequence of a
    // terminal log, a C1 control, a bidi override) made the write fail on fields the user
    // never wrote: the description was never asked, the name only offered.
    const pasted = "\x1b[31mERROR\x1b[0m deploy\u0085failed \u202eevil\u2029\nthe log";
    assert.equal(suggestedName(pasted), "[31mERROR [0m deploy failed evil");
    assert.equal(writeParams(target, { type: "project", text: pasted }).description, "[31mERROR [0m deploy failed evil");
    assert.equal(suggestedName("\x1b\u202e\t\n# Next line"), "Next line");
    const logged = await remember(client, target, { type: "project", text: pasted });
    assert.match(fs.readFileSync(logged.path, "utf8"), /^description: '\[31mERROR \[0m deploy failed evil'$/m);
    // As saved by the daemon: the name on disk holds no U+FFFD.
    const saved = await remember(client, target, { type: "project", text, name: suggestedName(`${"n".repeat(58)}🚀 launch`) });
    assert.match(fs.readFileSync(saved.path, "utf8"), /^name: n{58}🚀…$/m);
  });
});

describe("status line and notifications", () => {
  test("status: up, no model, team off", async () => {
    const view = await fetchStatus(client, repo.root);
    assert.equal(view.up, true);
    assert.equal(view.text, "$(database) memoryd · no model · team off");
    assert.match(view.tooltip, /Model: not configured — no model configured: set ANTHROPIC_API_KEY/);
    assert.match(view.tooltip, /Team sync: off — team sync is not configured/);
    const down = await fetchStatus(new MemorydClient({ socketPath: path.join(tmp, "nobody.sock"), reconnect: false }), repo.root);
    assert.equal(down.up, false);
    assert.equal(down.text, "$(debug-disconnect) memoryd down");
    assert.match(down.tooltip, /memctl start/);
    assert.equal(downView("/s", undefined).tooltip.split("\n")[0], "memoryd is not answering on /s");
  });

  test("memory/saved from the real daemon becomes one info message", async () => {
    const listener = new MemorydClient({ socketPath, timeoutMs: CALL_TIMEOUT_MS });
    const shown: Message[] = [];
    const presenter = new NotificationPresenter((m) => shown.push(m));
    listener.onNotification((n) => presenter.handle(n));
    try {
      await listener.subscribe();
      await remember(client, { cwd: repo.root, touchedPaths: [] }, { type: "user", name: "Senior Go dev", text: "The user is a senior Go developer." });
      // by what it says: it subscribed to every event, and another may come first
      const saved = (m: Message) => m.text.includes("user_senior_go_dev");
      await waitFor(() => shown.some(saved), PATIENCE_MS, "the notification");
      assert.deepEqual(shown.filter(saved).map((m) => [m.level, m.text]), [["info", "memoryd: memory saved: user_senior_go_dev.md"]]);
    } finally {
      presenter.dispose();
      listener.close();
    }
  });
});

describe("a project with team sync", () => {
  // Nothing listens on the team URL: writes stay local and sync retries, which is all this needs.
  const teamEnv = { ...env, MEMORYD_TEAM_URL: "http://127.0.0.1:9", MEMORYD_TEAM_TOKEN: "t-vscode-test" };
  const teamSock = path.join(tmp, "team.sock");
  const teamRepo = makeRepo(path.join(tmp, "team-widgets"), { remote: "git@github.com:acme/widgets.git" });
  let teamDaemon: Daemon;
  let teamClient: MemorydClient;
  before(async () => {
    teamDaemon = await Daemon.start(teamSock, teamEnv);
    teamClient = new MemorydClient({ socketPath: teamSock, timeoutMs: CALL_TIMEOUT_MS });
  });
  after(async () => {
    teamClient.close();
    await teamDaemon.stop();
  });

  test("team is offered, team: true lands in the team folder, the status line shows team state", async () => {
    const target = projectTarget({ filePath: teamRepo.apiFile });
    const sync = await teamSync(teamClient, target);
    assert.equal(sync?.repo, "acme/widgets");
    const shared = await remember(teamClient, target, { type: "reference", name: "Incident runbook", text: "The runbook is the wiki page Ops/On-call.", team: true });
    assert.match(shared.path, /\/memory\/team\/reference_incident_runbook\.md$/);
    assert.match(fs.readFileSync(shared.path, "utf8"), /Ops\/On-call/);
    assert.match(savedMessage(shared, true), /^Saved team memory /);
    const personal = await remember(teamClient, target, { type: "user", name: "Personal note", text: "Likes short answers." });
    assert.doesNotMatch(personal.path, /\/team\//);
    const list = await listMemories(teamClient, target);
    const tree = memoriesTree(list, target);
    assert.equal(findNode(tree, (n) => n.id === "type:team/reference")?.children?.[0]?.label, "Incident runbook", renderTree(tree).join("\n"));
    const view = await fetchStatus(teamClient, target.cwd);
    assert.match(view.text, /^\$\(database\) memoryd · no model · team (synced|retrying|error|\d+ pending)( · \d+ worker errors?)?$/);
    assert.match(view.tooltip, /Team sync: acme\/widgets via http:\/\/127\.0\.0\.1:9/);
  });
});
