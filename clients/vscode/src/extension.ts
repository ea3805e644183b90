// The VS Code layer, kept thin: settings, commands, the two tree views, the status bar item and
// messages. The socket client and every command's logic are in ./core (no vscode import there).
import * as os from "node:os";
import * as vscode from "vscode";

import { DownNotice, startDaemon } from "./core/daemon";
import { NoProjectError, projectTarget, type ProjectTarget } from "./core/editorContext";
import { errorText } from "./core/format";
import {
  deleteMemory,
  historyPicks,
  listMemories,
  MemoryDirs,
  memoriesErrorTree,
  memoriesTree,
  memoryHistory,
  reconcileSaved,
  restoreMemory,
} from "./core/memories";
import { EVENTS, NotificationPresenter, type Message } from "./core/notifications";
import { defaultQuery, emptyRecallMessage, recall, recallPicks } from "./core/recall";
import { MEMORY_TYPES, remember, savedMessage, suggestedName, teamSync, type MemoryType } from "./core/remember";
import { getContext, rulesTree, watchedFiles } from "./core/rules";
import { MemorydClient } from "./core/rpcClient";
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
    socketPath: resolveSocketPath(c.get<string>("socketPath")),
    requestTimeoutMs: c.get<number>("requestTimeoutMs", 5000),
    recallTimeoutMs: c.get<number>("recallTimeoutMs", 30000),
    connectTimeoutMs: c.get<number>("connectTimeoutMs", 2000),
    memctlPath: c.get<string>("memctlPath", "memctl"),
    showNotifications: c.get<boolean>("showNotifications", true),
  };
}

function editorTarget(): ProjectTarget {
  const editor = vscode.window.activeTextEditor;
  const uri = editor?.document.uri;
  const filePath = uri && uri.scheme === "file" && !editor.document.isUntitled ? uri.fsPath : undefined;
  const folder = (uri && vscode.workspace.getWorkspaceFolder(uri)) ?? vscode.workspace.workspaceFolders?.[0];
  return projectTarget({ filePath, workspaceFolder: folder?.uri.scheme === "file" ? folder.uri.fsPath : undefined });
}

function show(message: Message): void {
  const fn =
    message.level === "error" ? vscode.window.showErrorMessage : message.level === "warning" ? vscode.window.showWarningMessage : vscode.window.showInformationMessage;
  void fn(message.text);
}

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
  private refreshTimer: NodeJS.Timeout | undefined;

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
      vscode.workspace.onDidSaveTextDocument((doc) => this.saved(doc)),
      vscode.workspace.onDidChangeConfiguration((e) => {
        if (e.affectsConfiguration("memoryd")) {
          this.settings = readSettings();
          this.connect();
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
    });
    this.client.onStateChange(() => {
      void this.updateStatus();
      this.refreshAll();
    });
    this.downNotice = new DownNotice(this.client, (reason) => void this.offerStart(reason));
    this.client.subscribe(EVENTS).catch(() => undefined); // resubscribes when the daemon comes up
    void this.updateStatus();
    this.refreshAll();
  }

  private async offerStart(reason: string): Promise<void> {
    const choice = await vscode.window.showWarningMessage(reason, "Start memoryd", "Settings");
    if (choice === "Start memoryd") {
      await this.start();
    } else if (choice === "Settings") {
      await vscode.commands.executeCommand("workbench.action.openSettings", "memoryd");
    }
  }

  private async start(): Promise<void> {
    const result = await vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title: "Starting memoryd…" },
      () => startDaemon(this.settings.memctlPath, this.settings.socketPath),
    );
    if (result.ok) {
      await this.client.connect().catch(() => undefined);
      void vscode.window.showInformationMessage(result.output || "memoryd started");
    } else {
      void vscode.window.showErrorMessage(`memctl start failed: ${result.output}`);
    }
  }

  private scheduleRefresh(delayMs: number): void {
    if (this.refreshTimer) {
      clearTimeout(this.refreshTimer);
    }
    this.refreshTimer = setTimeout(() => this.refreshAll(), delayMs);
  }

  private refreshAll(): void {
    this.rules.refresh();
    this.memories.refresh();
    void this.updateStatus();
  }

  private async updateStatus(): Promise<void> {
    let cwd: string | undefined;
    try {
      cwd = editorTarget().cwd;
    } catch {
      cwd = undefined;
    }
    const view = await fetchStatus(this.client, cwd);
    this.status.text = view.text;
    this.status.tooltip = view.tooltip;
    this.status.backgroundColor = view.up ? undefined : new vscode.ThemeColor("statusBarItem.warningBackground");
  }

  private async loadRules(): Promise<ViewNode[]> {
    const target = editorTarget();
    const ctx = await getContext(this.client, target);
    this.ruleFiles = watchedFiles(ctx);
    return rulesTree(ctx, target, os.homedir());
  }

  private async loadMemories(): Promise<ViewNode[]> {
    const target = editorTarget();
    try {
      const list = await listMemories(this.client, target);
      this.memoryDirs.add(list, target);
      return memoriesTree(list, target, Date.now(), os.homedir());
    } catch (error) {
      return memoriesErrorTree(errorText(error));
    }
  }

  private async saved(doc: vscode.TextDocument): Promise<void> {
    if (doc.uri.scheme !== "file") {
      return;
    }
    const file = doc.uri.fsPath;
    if (this.memoryDirs.projectOf(file) !== undefined) {
      // Edited by hand: bring MEMORY.md in step, as after any edit made outside memoryd, in
      // the project the folder was listed for (the memory file's own folder is none).
      await this.guard(() => reconcileSaved(this.client, file, this.memoryDirs));
      this.memories.refresh();
    }
    if (this.ruleFiles.has(file) || /(CLAUDE|AGENTS)(\.local)?\.md$|\.claude\/rules\//.test(file)) {
      this.scheduleRefresh(400); // the daemon re-reads instruction files when they change
    }
  }

  private async guard<T>(what: () => Promise<T>): Promise<T | undefined> {
    try {
      return await what();
    } catch (error) {
      if (!(error instanceof NoProjectError) && !this.client.isUp) {
        return undefined; // the down notice already said so, once
      }
      void vscode.window.showErrorMessage(`memoryd: ${errorText(error)}`);
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

  private async open(file: string | undefined): Promise<void> {
    if (file) {
      await vscode.window.showTextDocument(vscode.Uri.file(file), { preview: true });
    }
  }

  private async recall(): Promise<void> {
    await this.guard(async () => {
      const target = editorTarget();
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
        void vscode.window.showInformationMessage(emptyRecallMessage(result, query));
        return;
      }
      const pick = await vscode.window.showQuickPick(recallPicks(result), { title: `Memories about "${query}" (${result.selector})`, matchOnDetail: true });
      if (pick) {
        await this.open(pick.path);
        if (pick.memory.stale && pick.memory.note) {
          void vscode.window.showWarningMessage(pick.memory.note);
        }
      }
    });
  }

  private async remember(): Promise<void> {
    await this.guard(async () => {
      const target = editorTarget();
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
      const choice = await vscode.window.showInformationMessage(savedMessage(result, team), "Open");
      if (choice === "Open") {
        await this.open(result.path);
      }
      this.memories.refresh();
    });
  }

  private async deleteMemory(node: ViewNode): Promise<void> {
    if (!node.path) {
      return;
    }
    const ok = await vscode.window.showWarningMessage(`Delete the memory "${node.label}"? Its content stays in history.`, { modal: true }, "Delete");
    if (ok === "Delete") {
      await this.guard(() => deleteMemory(this.client, editorTarget(), node.path!));
      this.memories.refresh();
    }
  }

  private async history(node: ViewNode): Promise<void> {
    await this.guard(async () => {
      const target = editorTarget();
      const history = await memoryHistory(this.client, target, node.path!);
      const picks = historyPicks(history);
      if (!picks.length) {
        void vscode.window.showInformationMessage(`memoryd: no earlier versions of ${node.label}`);
        return;
      }
      const pick = await vscode.window.showQuickPick(picks, { title: `History of ${node.label} (newest first): choose one to restore` });
      if (!pick) {
        return;
      }
      const ok = await vscode.window.showWarningMessage(`Restore ${node.label} to ${pick.description}? The current content goes to history first.`, { modal: true }, "Restore");
      if (ok === "Restore") {
        await restoreMemory(this.client, target, node.path!, pick.version);
        this.memories.refresh();
        await this.open(node.path);
      }
    });
  }

  private async showStatus(): Promise<void> {
    await this.updateStatus();
    const actions = this.client.isUp ? ["Refresh"] : ["Start memoryd", "Refresh"];
    const choice = await vscode.window.showInformationMessage(String(this.status.tooltip ?? ""), ...actions);
    if (choice === "Start memoryd") {
      await this.start();
    } else if (choice === "Refresh") {
      this.refreshAll();
    }
  }

  dispose(): void {
    if (this.refreshTimer) {
      clearTimeout(this.refreshTimer);
    }
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
