// A stand-in for the `vscode` module, enough of it to run src/extension.ts under node's test
// runner against the real daemon: what the extension shows is recorded, what the user would
// answer is scripted, and editor events can be fired. `install()` makes `require("vscode")`
// load this module.
import * as fs from "node:fs";
import * as path from "node:path";

// eslint-disable-next-line @typescript-eslint/no-require-imports
const Module = require("node:module") as { _resolveFilename: (request: string, ...rest: unknown[]) => string };

type Listener<T> = (value: T) => unknown;

export class Disposable {
  constructor(private readonly fn: () => void = () => undefined) {}
  dispose(): void {
    this.fn();
  }
}

export class EventEmitter<T> {
  private listeners = new Set<Listener<T>>();
  disposed = false;
  readonly event = (listener: Listener<T>): Disposable => {
    this.listeners.add(listener);
    return new Disposable(() => this.listeners.delete(listener));
  };
  fire(value: T): void {
    for (const listener of [...this.listeners]) {
      listener(value);
    }
  }
  get size(): number {
    return this.listeners.size;
  }
  dispose(): void {
    this.disposed = true;
    this.listeners.clear();
  }
}

export class Uri {
  private constructor(
    readonly scheme: string,
    readonly path: string,
    readonly query = "",
  ) {}
  static file(p: string): Uri {
    return new Uri("file", p);
  }
  static from(parts: { scheme: string; path: string; query?: string }): Uri {
    return new Uri(parts.scheme, parts.path, parts.query ?? "");
  }
  get fsPath(): string {
    return this.path;
  }
  with(change: { scheme?: string; path?: string; query?: string }): Uri {
    return new Uri(change.scheme ?? this.scheme, change.path ?? this.path, change.query ?? this.query);
  }
  toString(): string {
    return `${this.scheme}://${this.path}${this.query ? `?${this.query}` : ""}`;
  }
}

export class ThemeColor {
  constructor(readonly id: string) {}
}

export class ThemeIcon {
  constructor(readonly id: string) {}
}

export enum TreeItemCollapsibleState {
  None = 0,
  Collapsed = 1,
  Expanded = 2,
}

export enum StatusBarAlignment {
  Left = 1,
  Right = 2,
}

export enum ProgressLocation {
  SourceControl = 1,
  Window = 10,
  Notification = 15,
}

export class TreeItem {
  id?: string;
  description?: string;
  tooltip?: string;
  contextValue?: string;
  iconPath?: ThemeIcon;
  resourceUri?: Uri;
  command?: { command: string; title: string; arguments?: unknown[] };
  constructor(
    readonly label: string,
    readonly collapsibleState: TreeItemCollapsibleState = TreeItemCollapsibleState.None,
  ) {}
}

export interface Position {
  line: number;
  character: number;
}

export interface Selection {
  isEmpty: boolean;
  active: Position;
  text: string;
}

export class TextDocument {
  constructor(
    readonly uri: Uri,
    readonly text: string = uri.scheme === "file" && fs.existsSync(uri.fsPath) ? fs.readFileSync(uri.fsPath, "utf8") : "",
    readonly isUntitled = uri.scheme === "untitled",
  ) {}
  getText(range?: { text: string }): string {
    return range ? range.text : this.text;
  }
  getWordRangeAtPosition(): undefined {
    return undefined;
  }
}

export class TextEditor {
  selection: Selection;
  constructor(
    readonly document: TextDocument,
    selected = "",
  ) {
    this.selection = { isEmpty: !selected, active: { line: 0, character: 0 }, text: selected };
  }
}

export interface WorkspaceFolder {
  uri: Uri;
  name: string;
  index: number;
}

export interface Shown {
  level: "info" | "warning" | "error";
  text: string;
  items: string[];
  modal: boolean;
  /** Close the message as the user does (with the item chosen, or undefined: dismissed). */
  close(choice?: string): void;
  /** Whether it was answered or closed: until then its promise is pending, as in VS Code. */
  closed: boolean;
}

export interface StatusBarItem {
  text: string;
  tooltip: string | undefined;
  command: string | undefined;
  backgroundColor: ThemeColor | undefined;
  visible: boolean;
  disposed: boolean;
  show(): void;
  hide(): void;
  dispose(): void;
}

/** Everything the extension did and what the tests drive, reset by `reset()`. */
export const fake = {
  shown: [] as Shown[],
  /**
   * Answers to showInputBox, showQuickPick and messages with items, in order (undefined:
   * dismissed). A message with no answer queued stays open, its promise pending, as VS Code's
   * does until the user closes it (a toast that hides into the notification centre is not
   * closed); `Shown.close` closes it.
   */
  answers: [] as unknown[],
  quickPicks: [] as Array<{ items: unknown[]; title: string | undefined }>,
  commands: new Map<string, (...args: unknown[]) => unknown>(),
  executed: [] as Array<{ command: string; args: unknown[] }>,
  trees: new Map<string, { getChildren(node?: unknown): Promise<unknown[]> | unknown[]; getTreeItem(node: unknown): TreeItem; onDidChangeTreeData?: unknown }>(),
  statusItems: [] as StatusBarItem[],
  opened: [] as string[],
  config: {} as Record<string, unknown>,
  workspaceFolders: undefined as WorkspaceFolder[] | undefined,
  activeTextEditor: undefined as TextEditor | undefined,
  onDidChangeActiveTextEditor: new EventEmitter<TextEditor | undefined>(),
  onDidSaveTextDocument: new EventEmitter<TextDocument>(),
  onWillSaveTextDocument: new EventEmitter<WillSave>(),
  onDidChangeConfiguration: new EventEmitter<{ affectsConfiguration(section: string): boolean }>(),
  onDidChangeWorkspaceFolders: new EventEmitter<{ added: WorkspaceFolder[]; removed: WorkspaceFolder[] }>(),
};

export function reset(): void {
  fake.shown = [];
  fake.answers = [];
  fake.quickPicks = [];
  fake.commands.clear();
  fake.executed = [];
  fake.trees.clear();
  fake.statusItems = [];
  fake.opened = [];
  fake.config = {};
  fake.workspaceFolders = undefined;
  fake.activeTextEditor = undefined;
  for (const emitter of [fake.onDidChangeActiveTextEditor, fake.onDidSaveTextDocument, fake.onWillSaveTextDocument, fake.onDidChangeConfiguration, fake.onDidChangeWorkspaceFolders]) {
    emitter.dispose();
    emitter.disposed = false;
  }
}

/** What a will-save listener gets: the document, and `waitUntil` to hold the save back. */
export interface WillSave {
  document: TextDocument;
  reason: number;
  waitUntil(thenable: Thenable<unknown>): void;
}

/** Save `doc` as VS Code does: the will-save listeners first, the save once what they gave `waitUntil` settled. */
export async function save(doc: TextDocument, write: () => void): Promise<void> {
  const waits: Array<Thenable<unknown>> = [];
  fake.onWillSaveTextDocument.fire({ document: doc, reason: 1, waitUntil: (thenable) => waits.push(thenable) });
  await Promise.allSettled(waits);
  write();
  fake.onDidSaveTextDocument.fire(doc);
}

/** Set the workspace folders and tell the extension, as VS Code does when one is added or removed. */
export function setFolders(folders: string[]): void {
  const before = fake.workspaceFolders ?? [];
  const after = folders.map((f, index) => ({ uri: Uri.file(f), name: path.basename(f), index }));
  fake.workspaceFolders = after.length ? after : undefined;
  fake.onDidChangeWorkspaceFolders.fire({
    added: after.filter((a) => !before.some((b) => b.uri.fsPath === a.uri.fsPath)),
    removed: before.filter((b) => !after.some((a) => a.uri.fsPath === b.uri.fsPath)),
  });
}

/** Make `uri` the active editor (with `selected` text selected) and fire the change event. */
export function openEditor(uri: Uri | undefined, selected = ""): void {
  fake.activeTextEditor = uri ? new TextEditor(new TextDocument(uri), selected) : undefined;
  fake.onDidChangeActiveTextEditor.fire(fake.activeTextEditor);
}

function answer<T>(): T | undefined {
  return fake.answers.shift() as T | undefined;
}

function message(level: Shown["level"]) {
  return (text: string, ...rest: unknown[]): Promise<string | undefined> => {
    const modal = typeof rest[0] === "object" && rest[0] !== null && (rest[0] as { modal?: boolean }).modal === true;
    const items = rest.filter((r): r is string => typeof r === "string");
    let settle!: (choice: string | undefined) => void;
    const settled = new Promise<string | undefined>((resolve) => (settle = resolve));
    const shown: Shown = {
      level,
      text,
      items,
      modal,
      closed: false,
      close(choice?: string) {
        if (!shown.closed) {
          shown.closed = true;
          settle(choice);
        }
      },
    };
    fake.shown.push(shown);
    if (items.length && fake.answers.length) {
      shown.close(answer<string>());
    }
    return settled;
  };
}

export const window = {
  get activeTextEditor(): TextEditor | undefined {
    return fake.activeTextEditor;
  },
  onDidChangeActiveTextEditor: (l: Listener<TextEditor | undefined>) => fake.onDidChangeActiveTextEditor.event(l),
  showInformationMessage: message("info"),
  showWarningMessage: message("warning"),
  showErrorMessage: message("error"),
  showInputBox: (_options?: unknown): Promise<string | undefined> => Promise.resolve(answer<string>()),
  showQuickPick: (items: unknown[] | Promise<unknown[]>, options?: { title?: string }): Promise<unknown> =>
    Promise.resolve(items).then((list) => {
      fake.quickPicks.push({ items: list, title: options?.title });
      const chosen = answer<unknown>();
      // a number picks that item; anything else is the answer itself
      return typeof chosen === "number" ? list[chosen] : chosen;
    }),
  showTextDocument: (uri: Uri): Promise<TextEditor> => {
    fake.opened.push(uri.fsPath);
    openEditor(uri);
    return Promise.resolve(fake.activeTextEditor!);
  },
  withProgress: <T>(_options: unknown, task: () => Promise<T>): Promise<T> => task(),
  createStatusBarItem: (): StatusBarItem => {
    const item: StatusBarItem = {
      text: "",
      tooltip: undefined,
      command: undefined,
      backgroundColor: undefined,
      visible: false,
      disposed: false,
      show() {
        item.visible = true;
      },
      hide() {
        item.visible = false;
      },
      dispose() {
        item.disposed = true;
      },
    };
    fake.statusItems.push(item);
    return item;
  },
  registerTreeDataProvider: (id: string, provider: { getChildren(node?: unknown): Promise<unknown[]>; getTreeItem(node: unknown): TreeItem }): Disposable => {
    fake.trees.set(id, provider);
    return new Disposable(() => fake.trees.delete(id));
  },
};

export const workspace = {
  get workspaceFolders(): WorkspaceFolder[] | undefined {
    return fake.workspaceFolders;
  },
  getWorkspaceFolder: (uri: Uri): WorkspaceFolder | undefined => {
    if (uri.scheme !== "file") {
      return undefined;
    }
    return (fake.workspaceFolders ?? []).find((f) => !path.relative(f.uri.fsPath, uri.fsPath).startsWith(".."));
  },
  getConfiguration: (section: string) => ({
    get: <T>(key: string, fallback?: T): T | undefined => {
      const full = `${section}.${key}`;
      return full in fake.config ? (fake.config[full] as T) : fallback;
    },
  }),
  onDidSaveTextDocument: (l: Listener<TextDocument>) => fake.onDidSaveTextDocument.event(l),
  onWillSaveTextDocument: (l: Listener<WillSave>) => fake.onWillSaveTextDocument.event(l),
  onDidChangeConfiguration: (l: Listener<{ affectsConfiguration(section: string): boolean }>) => fake.onDidChangeConfiguration.event(l),
  onDidChangeWorkspaceFolders: (l: Listener<{ added: WorkspaceFolder[]; removed: WorkspaceFolder[] }>) => fake.onDidChangeWorkspaceFolders.event(l),
};

/** Change settings and fire the event, as the Settings editor does. */
export function setConfig(values: Record<string, unknown>): void {
  Object.assign(fake.config, values);
  const keys = Object.keys(values);
  fake.onDidChangeConfiguration.fire({ affectsConfiguration: (section) => keys.some((k) => k === section || k.startsWith(`${section}.`)) });
}

export const commands = {
  registerCommand: (name: string, fn: (...args: unknown[]) => unknown): Disposable => {
    if (fake.commands.has(name)) {
      throw new Error(`command '${name}' already exists`);
    }
    fake.commands.set(name, fn);
    return new Disposable(() => fake.commands.delete(name));
  },
  executeCommand: async (name: string, ...args: unknown[]): Promise<unknown> => {
    fake.executed.push({ command: name, args });
    const fn = fake.commands.get(name);
    return fn ? fn(...args) : undefined;
  },
};

/** What the views show now: every node of `viewId` as its label and description, depth-first. */
export async function viewText(viewId: string): Promise<string[]> {
  const provider = fake.trees.get(viewId);
  if (!provider) {
    throw new Error(`no view ${viewId}`);
  }
  const lines: string[] = [];
  const walk = async (node: unknown, depth: number): Promise<void> => {
    for (const child of await provider.getChildren(node)) {
      const item = provider.getTreeItem(child);
      lines.push(`${"  ".repeat(depth)}${item.label}${item.description ? `  — ${item.description}` : ""}`);
      await walk(child, depth + 1);
    }
  };
  await walk(undefined, 0);
  return lines;
}

let installed = false;

/** Make `require("vscode")` resolve to this module. */
export function install(): void {
  if (installed) {
    return;
  }
  installed = true;
  const original = Module._resolveFilename;
  Module._resolveFilename = function (request: string, ...rest: unknown[]): string {
    return request === "vscode" ? __filename : original.call(this, request, ...rest);
  };
}
