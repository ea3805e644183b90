// The VS Code layer, kept thin: settings, commands, the two tree views, the status bar item and
// messages. The socket client and every command's logic are in ./core (no vscode import there).
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import * as vscode from "vscode";

import { DownNotice, startDaemon } from "./core/daemon";
import { Debounce } from "./core/debounce";
import { documentFile, projectTarget, type ProjectTarget } from "./core/editorContext";
import { errorText, messageText, oneLine } from "./core/format";
import {
  deleteMemory,
  historyPicks,
  listMemories,
  MemoryDirs,
  memoriesErrorTree,
  memoriesTree,
  memoryHistory,
  reconcileSaved,
  reconcileWarnings,
  restoreMemory,
  snapshotBeforeSave,
} from "./core/memories";
import { EVENTS, NotificationPresenter, knownEvents, type Message } from "./core/notifications";
import { defaultQuery, emptyRecallMessage, recall, recallPicks } from "./core/recall";
import { MEMORY_TYPES, remember, savedNotice, suggestedName, teamSync, type MemoryType } from "./core/remember";
import { concernsTarget, getContext, rulesTree, watchedFiles } from "./core/rules";
import { DaemonUnavailable, MemorydClient, notASocket, RpcError, socketPathTooLong, STOPPING } from "./core/rpcClient";
import { resolveSocketPath } from "./core/socketPath";
import { fetchStatus } from "./core/status";
import type { ViewNode } from "./core/viewNode";
import { NodeTreeProvider } from "./views/nodeTree";

interface Settings {
  socketPath: string;
  requestTimeoutMs: number;
  recallTimeoutMs: number;
  connectTimeoutMs: number;
  memctlPath: string;
  showNotifications: boolean;
}

function readSettings(): Settings {
  const c = vscode.workspace.getConfiguration("memoryd");
  return {
    // An XDG_RUNTIME_DIR that is no runtime folder of the user's is passed over: say so, once.
    socketPath: resolveSocketPath(checkedSetting(c, "socketPath", "", isString, "a path", "memctl's socket rule"), process.env, (m) => void vscode.window.showWarningMessage(`memoryd: ${m}`)),
    requestTimeoutMs: timeoutSetting(c, "requestTimeoutMs", 5000),
    recallTimeoutMs: timeoutSetting(c, "recallTimeoutMs", 30000),
    connectTimeoutMs: timeoutSetting(c, "connectTimeoutMs", 2000),
    memctlPath: checkedSetting(c, "memctlPath", "memctl", isString, "a command"),
    showNotifications: checkedSetting(c, "showNotifications", true, (v): v is boolean => typeof v === "boolean", "true or false"),
  };
}

/** The settings schema's minimum for a timeout, which VS Code only warns of in its editor. */
const MIN_TIMEOUT_MS = 100;
const settingWarnings = new Set<string>();

const isString = (v: unknown): v is string => typeof v === "string";

/**
 * A setting of the type its schema gives, else the default, said once a session: settings.json
 * takes any JSON and VS Code only warns of a wrong type in its editor. A socketPath of 42 threw
 * in activation (`trim is not a function`: no view, command or status bar item at all), a
 * memctlPath of 42 in Start memoryd, and a showNotifications of "false" turned them on.
 */
function checkedSetting<T>(c: vscode.WorkspaceConfiguration, key: string, fallback: T, ok: (v: unknown) => v is T, expected: string, fallbackText = JSON.stringify(fallback)): T {
  const value = c.get<unknown>(key, fallback);
  if (ok(value)) {
    return value;
  }
  const text = `memoryd.${key} is ${JSON.stringify(value) ?? String(value)}, not ${expected}: ${fallbackText} is used`;
  if (!settingWarnings.has(text)) {
    settingWarnings.add(text);
    void say("warning", `memoryd: ${text}`);
  }
  return fallback;
}

/**
 * A timeout setting: a number of at least MIN_TIMEOUT_MS, else the default, said once a session.
 * A string ("5s") or a number under 1 made every timer fire at once: each call "did not
 * answer", each connect failed, the daemon shown down while it ran.
 */
function timeoutSetting(c: vscode.WorkspaceConfiguration, key: string, fallback: number): number {
  return checkedSetting(c, key, fallback, (v): v is number => typeof v === "number" && v >= MIN_TIMEOUT_MS, `a number of milliseconds of at least ${MIN_TIMEOUT_MS}`);
}

/** The project the active editor is about; `projectOf` knows the memory folders listed. */
function editorTarget(projectOf?: (file: string) => string | undefined): ProjectTarget {
  const editor = vscode.window.activeTextEditor;
  const uri = editor?.document.uri;
  // a notebook cell or a git: view is about a file on disk too, in its own workspace folder
  const filePath = uri ? documentFile(uri, editor.document.isUntitled) : undefined;
  const folder = (filePath !== undefined ? vscode.workspace.getWorkspaceFolder(vscode.Uri.file(filePath)) : undefined) ?? vscode.workspace.workspaceFolders?.[0];
  return projectTarget({ filePath, workspaceFolder: folder?.uri.scheme === "file" ? folder.uri.fsPath : undefined, projectOf });
}

/**
 * Every message goes out through here: VS Code makes `[label](command:…)` in a message a link
 * that runs the command, and memory names, paths and daemon messages are put in messages.
 */
function say(level: Message["level"], text: string, ...items: string[]): Thenable<string | undefined> {
  const fn = level === "error" ? vscode.window.showErrorMessage : level === "warning" ? vscode.window.showWarningMessage : vscode.window.showInformationMessage;
  return fn(messageText(text), ...items);
}

/**
 * Say `text` with `items` and act on the item chosen, without waiting for the choice: VS Code
 * settles a message's promise only when the user closes it (a toast hidden into the notification
 * centre is not closed), so whatever follows a message must never wait on it.
 */
function offer(level: Message["level"], text: string, items: string[], act: (choice: string) => unknown): void {
  void say(level, text, ...items)
    .then((choice) => (choice !== undefined && items.includes(choice) ? act(choice) : undefined))
    .then(undefined, (error: unknown) => void say("error", `memoryd: ${errorText(error)}`));
}

function show(message: Message): void {
  void say(message.level, message.text);
}

/** The settings a change of which needs a new connection; the others are read when used. */
const CONNECTION_SETTINGS = ["socketPath", "requestTimeoutMs", "connectTimeoutMs"] as const;

class MemorydExtension implements vscode.Disposable {
  private settings = readSettings();
  private client!: MemorydClient;
  private downNotice: DownNotice | undefined;
  private readonly presenter = new NotificationPresenter(show);
  private readonly rules = new NodeTreeProvider(() => this.loadRules());
  private readonly memories = new NodeTreeProvider(() => this.loadMemories());
  private readonly status = vscode.window.createStatusBarItem(vscode.StatusBarAlignment.Left, 50);
  private readonly disposables: vscode.Disposable[] = [];
  private ruleFiles = new Set<string>();
  private readonly memoryDirs = new MemoryDirs(); // each listed memory folder and its project
  private readonly refresher = new Debounce(() => this.refreshAll());
  // `status` asks that overlap (a refresh, a state change, Show Status) may be answered out of
  // order: one applied after a newer one put an old state back in the status bar.
  private statusAsked = 0;
  private statusShown = 0;
  private statusWarning: string | undefined; // another daemon of the user's, from `status`

  constructor() {
    this.status.command = "memoryd.status";
    this.status.show();
    this.connect();
    const cmd = (name: string, fn: (...args: never[]) => unknown) => vscode.commands.registerCommand(name, fn);
    this.disposables.push(
      this.status,
      vscode.window.registerTreeDataProvider("memoryd.rulesView", this.rules),
      vscode.window.registerTreeDataProvider("memoryd.memoriesView", this.memories),
      cmd("memoryd.rules", () => this.showRules()),
      cmd("memoryd.recall", () => this.recall()),
      cmd("memoryd.remember", () => this.remember()),
      cmd("memoryd.memories", () => this.showMemories()),
      cmd("memoryd.status", () => this.showStatus()),
      cmd("memoryd.start", () => this.start()),
      cmd("memoryd.refresh", () => this.refreshAll()),
      cmd("memoryd.openPath", (node: ViewNode) => this.open(node.path)),
      cmd("memoryd.deleteMemory", (node: ViewNode) => this.deleteMemory(node)),
      cmd("memoryd.memoryHistory", (node: ViewNode) => this.history(node)),
      vscode.window.onDidChangeActiveTextEditor(() => this.scheduleRefresh(150)),
      // with no editor open the views are about the first folder, which this may change
      vscode.workspace.onDidChangeWorkspaceFolders(() => this.scheduleRefresh(150)),
      vscode.workspace.onWillSaveTextDocument((e) => this.willSave(e)),
      vscode.workspace.onDidSaveTextDocument((doc) => this.saved(doc)),
      vscode.workspace.onDidChangeConfiguration((e) => {
        if (e.affectsConfiguration("memoryd")) {
          const before = this.settings;
          this.settings = readSettings();
          // A new connection fails every call in flight (a recall waiting on a model), so
          // only a change to the connection itself makes one.
          if (CONNECTION_SETTINGS.some((key) => before[key] !== this.settings[key])) {
            this.connect();
          }
        }
      }),
    );
  }

  private connect(): void {
    this.downNotice?.close();
    this.client?.close();
    const s = this.settings;
    this.client = new MemorydClient({ socketPath: s.socketPath, timeoutMs: s.requestTimeoutMs, connectTimeoutMs: s.connectTimeoutMs });
    this.client.onNotification((n) => {
      if (this.settings.showNotifications) {
        this.presenter.handle(n);
      }
      if (n.method === "memory/saved" || n.method === "team/synced") {
        this.scheduleRefresh(300);
      }
      if (n.method === "context/changed" && this.concernsViews(n.params.project)) {
        // The daemon sends one per project per 250 ms at most: no timer of our own, which a
        // steady stream would push back for as long as it lasts.
        this.rules.refresh();
        this.memories.refresh(); // it lists the instruction files too
      }
    });
    this.client.onStateChange((state) => {
      void this.updateStatus();
      this.refreshAll();
      if (state === "up") {
        this.subscribe(); // the daemon may be another version now
      }
    });
    this.downNotice = new DownNotice(this.client, (reason) => this.offerStart(reason));
    this.subscribe();
    void this.updateStatus();
    this.refreshAll();
  }

  /**
   * Every event the editor uses; a daemon older than one of them refuses the whole set, so the
   * events it knows are asked for then (it sends context/changed never, the others as before).
   * While the daemon is down this waits: the client subscribes when it comes up. Any other
   * refusal is said, as Neovim says it (it was swallowed: no notification came, and nothing
   * said why).
   */
  private subscribe(): void {
    const client = this.client;
    const refused = (error: unknown): void => {
      // A daemon stopping (-32006 twice: this one and the next connection's) is an outage:
      // the client subscribes again when it reconnects, as after DaemonUnavailable.
      const gone = error instanceof DaemonUnavailable || (error instanceof RpcError && error.code === STOPPING);
      if (client === this.client && !gone) {
        show({ level: "warning", text: `memoryd: could not subscribe to notifications: ${errorText(error)}` });
      }
    };
    client.subscribe(EVENTS).catch((error: unknown) => {
      const kept = knownEvents(error, EVENTS);
      if (kept && client === this.client) {
        client.subscribe(kept).catch(refused);
      } else {
        refused(error);
      }
    });
  }

  /** Whether a context/changed of this project is about what the views show. */
  private concernsViews(project: unknown): boolean {
    try {
      return concernsTarget(project, this.target(), (p) => fs.realpathSync.native(p));
    } catch {
      return false; // no project open: the views show no project's rules
    }
  }

  /** The project the active editor is about (a memory file: the project it was listed for). */
  private target(): ProjectTarget {
    return editorTarget((file) => this.memoryDirs.projectOf(file));
  }

  /** Whether starting the daemon could help: `memctl start` does not replace a folder, file or FIFO at the socket path, nor listen on a path too long for a socket. */
  private startHelps(): boolean {
    return notASocket(this.client.socketPath) === undefined && socketPathTooLong(this.client.socketPath) === undefined;
  }

  private offerStart(reason: string): void {
    offer("warning", reason, this.startHelps() ? ["Start memoryd", "Settings"] : ["Settings"], (choice) =>
      choice === "Start memoryd" ? this.start() : vscode.commands.executeCommand("workbench.action.openSettings", "memoryd"),
    );
  }

  private async start(): Promise<void> {
    const result = await vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title: "Starting memoryd…" },
      () => startDaemon(this.settings.memctlPath, this.settings.socketPath),
    );
    if (result.ok) {
      await this.client.connect().catch(() => undefined);
      void say("info", result.output || "memoryd started");
    } else {
      void say("error", `memctl start failed: ${result.output}`);
    }
  }

  private scheduleRefresh(delayMs: number): void {
    this.refresher.ask(delayMs);
  }

  private refreshAll(): void {
    this.rules.refresh();
    this.memories.refresh();
    void this.updateStatus();
  }

  private async updateStatus(): Promise<void> {
    let cwd: string | undefined;
    try {
      cwd = this.target().cwd;
    } catch {
      cwd = undefined;
    }
    const client = this.client;
    const asked = ++this.statusAsked;
    const view = await fetchStatus(client, cwd);
    // A newer answer is shown already; or this one came on a connection a setting change closed
    // since: its call failed with the close ("memoryd down") while the daemon was up.
    if (asked < this.statusShown || client !== this.client) {
      return;
    }
    this.statusShown = asked;
    this.status.text = view.text;
    this.status.tooltip = view.tooltip;
    this.statusWarning = view.warning;
    this.status.backgroundColor = view.up && !view.warning ? undefined : new vscode.ThemeColor("statusBarItem.warningBackground");
  }

  private async loadRules(): Promise<ViewNode[]> {
    const target = this.target();
    const ctx = await getContext(this.client, target);
    this.ruleFiles = watchedFiles(ctx);
    this.memoryDirs.addDir(ctx.memory_dir, target.cwd); // MEMORY.md opened from here
    return rulesTree(ctx, target, os.homedir());
  }

  private async loadMemories(): Promise<ViewNode[]> {
    const target = this.target();
    try {
      const list = await listMemories(this.client, target);
      this.memoryDirs.add(list, target);
      return memoriesTree(list, target, Date.now(), os.homedir());
    } catch (error) {
      return memoriesErrorTree(errorText(error));
    }
  }

  /** A memory file about to be saved by hand: its text on disk is kept in history first. */
  private willSave(e: vscode.TextDocumentWillSaveEvent): void {
    if (e.document.uri.scheme !== "file" || this.memoryDirs.projectOf(e.document.uri.fsPath) === undefined) {
      return;
    }
    const file = e.document.uri.fsPath;
    e.waitUntil(
      snapshotBeforeSave(this.client, file, this.memoryDirs).then((why) => {
        if (why !== undefined) {
          // not awaited: the save waits for this promise, not for the user to close a message
          show({ level: "warning", text: `memoryd: ${oneLine(path.basename(file))}: the text this save replaced was not kept in history: ${oneLine(why)}` });
        }
      }),
    );
  }

  private async saved(doc: vscode.TextDocument): Promise<void> {
    if (doc.uri.scheme !== "file") {
      return;
    }
    const file = doc.uri.fsPath;
    if (this.memoryDirs.projectOf(file) !== undefined) {
      // Edited by hand: bring MEMORY.md in step, as after any edit made outside memoryd, in
      // the project the folder was listed for (the memory file's own folder is none).
      const result = await this.guard(() => reconcileSaved(this.client, file, this.memoryDirs), "MEMORY.md not brought in step", true);
      // a protected index is left and the other rewritten: the reply says so, no longer an error
      for (const warning of reconcileWarnings(result)) {
        show({ level: "warning", text: `memoryd: MEMORY.md not brought in step: ${oneLine(warning)}` });
      }
      this.memories.refresh();
    }
    if (this.ruleFiles.has(file) || /(CLAUDE|AGENTS)(\.local)?\.md$|\.claude\/rules\//.test(file)) {
      this.scheduleRefresh(400); // the daemon re-reads instruction files when they change
    }
  }

  /**
   * Run a command's work; a failure is said (`failed` says what did not happen), and not waited
   * on: what follows the guard (a view's refresh) runs while the message is open. A command the
   * user ran says so even while the daemon is down (the outage warning came once, maybe long
   * ago: Remember asked for a type and a name and then dropped the text without a word);
   * `quietWhenDown` is for work the user did not ask for (the reconcile after a save).
   */
  private async guard<T>(what: () => Promise<T>, failed: string, quietWhenDown = false): Promise<T | undefined> {
    try {
      return await what();
    } catch (error) {
      const down = error instanceof DaemonUnavailable;
      if (down && quietWhenDown) {
        return undefined; // the down notice says so, once per outage
      }
      // not awaited: the work after a guarded failure (a view's refresh) would wait until the
      // user closed the message
      offer("error", `memoryd: ${failed}: ${errorText(error)}`, down && this.startHelps() ? ["Start memoryd"] : [], () => this.start());
      return undefined;
    }
  }

  private async showRules(): Promise<void> {
    this.rules.refresh();
    await vscode.commands.executeCommand("memoryd.rulesView.focus");
  }

  private async showMemories(): Promise<void> {
    this.memories.refresh();
    await vscode.commands.executeCommand("memoryd.memoriesView.focus");
  }

  private async open(file: string | undefined, project?: string): Promise<void> {
    if (file) {
      if (project) {
        // a memory: its folder is not a project, the views stay on `project`
        this.memoryDirs.addDir(path.dirname(file), project);
      }
      await vscode.window.showTextDocument(vscode.Uri.file(file), { preview: true });
    }
  }

  private async recall(): Promise<void> {
    await this.guard(async () => {
      const target = this.target();
      const editor = vscode.window.activeTextEditor;
      const selection = editor && !editor.selection.isEmpty ? editor.document.getText(editor.selection) : undefined;
      const wordRange = editor?.document.getWordRangeAtPosition(editor.selection.active);
      const word = wordRange ? editor?.document.getText(wordRange) : undefined;
      const query = await vscode.window.showInputBox({ prompt: "Recall memories about…", value: defaultQuery(selection, word) });
      if (!query) {
        return;
      }
      const result = await recall(this.client, target, query, { timeoutMs: this.settings.recallTimeoutMs });
      if (!result.memories.length) {
        void say("info", emptyRecallMessage(result, query));
        return;
      }
      const pick = await vscode.window.showQuickPick(recallPicks(result), { title: oneLine(`Memories about "${query}" (${result.selector})`), matchOnDetail: true });
      if (pick) {
        await this.open(pick.path, target.cwd);
        if (pick.memory.stale && pick.memory.note) {
          void say("warning", pick.memory.note);
        }
      }
    }, "recall failed");
  }

  private async remember(): Promise<void> {
    await this.guard(async () => {
      const target = this.target();
      const editor = vscode.window.activeTextEditor;
      let text = editor && !editor.selection.isEmpty ? editor.document.getText(editor.selection) : "";
      if (!text.trim()) {
        text = (await vscode.window.showInputBox({ prompt: "Remember what?" })) ?? "";
      }
      if (!text.trim()) {
        return;
      }
      const typePick = await vscode.window.showQuickPick(
        MEMORY_TYPES.map((t) => ({ label: t.type, detail: t.detail })),
        { title: "Memory type" },
      );
      if (!typePick) {
        return;
      }
      const name = await vscode.window.showInputBox({ prompt: "Name", value: suggestedName(text) });
      if (name === undefined) {
        return;
      }
      let team = false;
      const sync = await teamSync(this.client, target);
      if (sync) {
        const scope = await vscode.window.showQuickPick(["Personal", `Team (${sync.repo})`], { title: "Save for" });
        if (!scope) {
          return;
        }
        team = scope !== "Personal";
      }
      const result = await remember(this.client, target, { type: typePick.label as MemoryType, text, name, team });
      this.memories.refresh();
      const notice = savedNotice(result, team);
      offer(notice.level, notice.text, ["Open"], () => this.open(result.path, target.cwd));
    }, "not saved");
  }

  private async deleteMemory(node: ViewNode): Promise<void> {
    if (!node.path) {
      return;
    }
    const ok = await vscode.window.showWarningMessage(messageText(`Delete the memory "${node.label}"? Its content stays in history.`), { modal: true }, "Delete");
    if (ok === "Delete") {
      await this.guard(() => deleteMemory(this.client, this.nodeTarget(node), node.path!), "not deleted");
      this.memories.refresh();
    }
  }

  /** The project a memory row was listed for (the active editor may be elsewhere by now). */
  private nodeTarget(node: ViewNode): ProjectTarget {
    const cwd = node.data?.cwd;
    return cwd ? { cwd, touchedPaths: [] } : this.target();
  }

  private async history(node: ViewNode): Promise<void> {
    await this.guard(async () => {
      const target = this.nodeTarget(node);
      const history = await memoryHistory(this.client, target, node.path!);
      const picks = historyPicks(history);
      if (!picks.length) {
        void say("info", `memoryd: no earlier versions of ${node.label}`);
        return;
      }
      const pick = await vscode.window.showQuickPick(picks, { title: oneLine(`History of ${node.label} (newest first): choose one to restore`) });
      if (!pick) {
        return;
      }
      const ok = await vscode.window.showWarningMessage(messageText(`Restore ${node.label} to ${pick.description}? The current content goes to history first.`), { modal: true }, "Restore");
      if (ok === "Restore") {
        const restored = await restoreMemory(this.client, target, node.path!, pick.version);
        this.memories.refresh();
        if (restored.warnings?.length) {
          void say("warning", `memoryd: ${node.label} restored; ${restored.warnings.join("; ")}`);
        }
        await this.open(node.path, target.cwd);
      }
    }, "history failed");
  }

  private async showStatus(): Promise<void> {
    await this.updateStatus();
    const actions = this.client.isUp || !this.startHelps() ? ["Refresh"] : ["Start memoryd", "Refresh"];
    // a message is one line: the tooltip's lines side by side
    offer(this.statusWarning ? "warning" : "info", String(this.status.tooltip ?? "").split("\n").join(" · "), actions, (choice) =>
      choice === "Start memoryd" ? this.start() : this.refreshAll(),
    );
  }

  dispose(): void {
    this.refresher.dispose();
    this.presenter.dispose();
    this.downNotice?.close();
    this.client.close();
    this.rules.dispose();
    this.memories.dispose();
    for (const d of this.disposables) {
      d.dispose();
    }
  }
}

let extension: MemorydExtension | undefined;

export function activate(context: vscode.ExtensionContext): void {
  extension = new MemorydExtension();
  context.subscriptions.push(extension); // VS Code disposes it after deactivate
}

export function deactivate(): void {
  extension = undefined;
}
