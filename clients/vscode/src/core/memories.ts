// The memory list (`memory.list`) grouped as the memory UI shows it, and the actions on one
// memory: read, delete, history, restore.
import * as fs from "node:fs";
import * as path from "node:path";

import type { ProjectTarget } from "./editorContext";
import { age, errorText, oneLine, shortPath } from "./format";
import { rulesTree } from "./rules";
import { RpcError, type MemorydClient } from "./rpcClient";
import type { HistoryResult, ListedMemory, MemoryListResult, ReconcileResult } from "./types";
import type { ViewNode } from "./viewNode";

const TYPE_ORDER = ["user", "feedback", "project", "reference"];

export function listMemories(client: MemorydClient, target: ProjectTarget): Promise<MemoryListResult> {
  return client.call<MemoryListResult>("memory.list", { cwd: target.cwd });
}

function groupKey(memory: ListedMemory): string {
  const kind = memory.type ?? "untyped";
  return memory.team ? `team/${kind}` : kind;
}

function groupRank(key: string): number {
  const team = key.startsWith("team/");
  const index = TYPE_ORDER.indexOf(team ? key.slice(5) : key);
  return (team ? 10 : 0) + (index === -1 ? 5 : index);
}

/** One memory's row; `cwd` is the project it was listed for, which its menu actions use. */
export function memoryNode(memory: ListedMemory, nowMs: number, cwd?: string): ViewNode {
  const name = oneLine(memory.name || path.basename(memory.path, ".md"));
  const problem = memory.problem ? ` · ⚠ ${oneLine(memory.problem)}` : "";
  return {
    id: `memory:${memory.path}`,
    label: name,
    description: `${age(memory.mtime, nowMs)} · ${oneLine(memory.description ?? "")}${problem}`,
    tooltip: [oneLine(memory.path), oneLine(memory.description ?? ""), memory.problem ? `problem: ${oneLine(memory.problem)}` : ""]
      .filter(Boolean)
      .join("\n"),
    path: memory.path,
    icon: memory.problem ? "warning" : memory.team ? "organization" : "note",
    contextValue: "memory",
    ...(cwd ? { data: { cwd } } : {}),
  };
}

/** Memories grouped by type (yours first, then team), newest first; instruction files on top. */
export function memoriesTree(list: MemoryListResult, target: ProjectTarget, nowMs: number = Date.now(), home?: string): ViewNode[] {
  const groups = new Map<string, ListedMemory[]>();
  for (const memory of list.memories ?? []) {
    const key = groupKey(memory);
    const members = groups.get(key) ?? [];
    members.push(memory);
    groups.set(key, members);
  }
  const nodes: ViewNode[] = [];
  const instructions = list.instruction_files ?? [];
  nodes.push({
    id: "instructions",
    label: "Instruction files",
    description: `${instructions.length}`,
    icon: "book",
    children: rulesTree({ files: instructions, skipped: [], warnings: [], memory_dir: null, index_truncated: false, cached: false }, target, home).filter(
      (n) => n.id !== "none",
    ),
  });
  const total = (list.memories ?? []).length;
  const keys = [...groups.keys()].sort((a, b) => groupRank(a) - groupRank(b) || a.localeCompare(b));
  nodes.push({
    id: "memories",
    label: "Memories",
    description: total ? `${total}` : "none yet",
    tooltip: list.memory_dir,
    path: list.memory_dir,
    icon: "database",
    contextValue: "memoryDir",
    children: keys.map((key) => {
      const members = [...(groups.get(key) ?? [])].sort((a, b) => b.mtime - a.mtime);
      return {
        id: `type:${key}`,
        label: key,
        description: `${members.length}`,
        icon: key.startsWith("team/") ? "organization" : "symbol-folder",
        children: members.map((m) => memoryNode(m, nowMs, target.cwd)),
      };
    }),
  });
  for (const [i, warning] of (list.warnings ?? []).entries()) {
    nodes.push({ id: `warning:${i}`, label: warning, tooltip: warning, icon: "warning" });
  }
  return nodes;
}

/** The tree when memory.list failed (e.g. auto memory is off: the daemon's reason is shown). */
export function memoriesErrorTree(message: string): ViewNode[] {
  return [{ id: "error", label: message, tooltip: message, icon: "warning" }];
}

export function readMemory(client: MemorydClient, target: ProjectTarget, memoryPath: string): Promise<{ path: string; content: string }> {
  return client.call("memory.read", { cwd: target.cwd, path: memoryPath });
}

export function deleteMemory(client: MemorydClient, target: ProjectTarget, memoryPath: string): Promise<{ deleted: boolean; path: string }> {
  return client.call("memory.delete", { cwd: target.cwd, path: memoryPath });
}

export function memoryHistory(client: MemorydClient, target: ProjectTarget, memoryPath: string): Promise<HistoryResult> {
  return client.call<HistoryResult>("memory.history", { cwd: target.cwd, path: memoryPath });
}

export function restoreMemory(
  client: MemorydClient,
  target: ProjectTarget,
  memoryPath: string,
  version: string,
): Promise<{ path: string; restored: string; warnings?: string[] }> {
  return client.call("memory.restore", { cwd: target.cwd, path: memoryPath, version });
}

export interface VersionPick {
  label: string;
  description: string;
  version: string;
}

/** History rows, newest first: when, size, why it was kept. */
export function historyPicks(history: HistoryResult, nowMs: number = Date.now()): VersionPick[] {
  return (history.versions ?? []).map((v) => ({
    label: `${age(v.timestamp, nowMs)} ago`,
    description: `${v.time} · ${v.size} bytes · ${v.reason}`,
    version: v.version,
  }));
}

/**
 * The memory folders the Memories view listed, each with the project (the `cwd`) it was listed
 * for: a memory file's own folder is no project of its own (as a cwd it names another, empty
 * project), so a save there is reconciled in the project its folder belongs to.
 */
export class MemoryDirs {
  private readonly projects = new Map<string, string>();

  /** Remember the folder of a `memory.list` reply and the project it was asked for. */
  add(list: MemoryListResult, target: ProjectTarget): void {
    if (list.memory_dir) {
      this.addDir(list.memory_dir, target.cwd);
    }
  }

  /** Remember one memory folder (get_context's `memory_dir`, a recalled or written memory's). */
  addDir(dir: string | null | undefined, cwd: string): void {
    if (dir && path.isAbsolute(dir)) {
      this.projects.set(dir, cwd);
    }
  }

  /** The project whose memory folder holds `file`, if a listed folder does. */
  projectOf(file: string): string | undefined {
    const dir = inMemoryDir(file, this.projects.keys());
    return dir === undefined ? undefined : this.projects.get(dir);
  }
}

/**
 * After a memory file was saved by hand, bring its project's MEMORY.md in step
 * (`memory.reconcile`, as after any edit made outside memoryd); undefined when `file` is in no
 * memory folder the list knows.
 */
export async function reconcileSaved(client: MemorydClient, file: string, dirs: MemoryDirs): Promise<ReconcileResult | undefined> {
  const cwd = dirs.projectOf(file);
  if (cwd === undefined) {
    return undefined;
  }
  return client.call<ReconcileResult>("memory.reconcile", { cwd });
}

/**
 * The reconcile's warnings (a protected index left as it was, the other brought in step):
 * its strings, none when the field is missing or not a list (a daemon may send anything).
 */
export function reconcileWarnings(result: ReconcileResult | undefined): string[] {
  const warnings: unknown = result?.warnings;
  return Array.isArray(warnings) ? warnings.filter((w): w is string => typeof w === "string" && w !== "") : [];
}

/**
 * What VS Code gives a will-save listener: past 1,500 ms its save goes on without it, and a
 * listener late three times is never asked again. The snapshot is waited for a little less.
 */
export const SNAPSHOT_WAIT_MS = 1200;

/** A file's size and mtime as `memory.snapshot`'s `expect` takes them (docs/protocol.md). */
export interface FileStamp {
  size: number;
  /** Digits: nanoseconds since 1970 are past what a JavaScript number holds exactly. */
  mtime_ns: string;
}

/** `file`'s stamp, undefined when it is not on disk; lstat, as the daemon stamps it. */
export function fileStamp(file: string): FileStamp | undefined {
  let info: fs.BigIntStats | undefined;
  try {
    info = fs.lstatSync(file, { bigint: true, throwIfNoEntry: false });
  } catch {
    return undefined; // unreachable (a loop of links, a name too long): no text to keep, as for none
  }
  return info === undefined ? undefined : { size: Number(info.size), mtime_ns: info.mtimeNs.toString() };
}

/** A daemon before session 23 refuses `expect` as an unknown field: ask it again without. */
export function refusesExpect(error: unknown): boolean {
  return error instanceof RpcError && error.code === -32602 && error.message.includes("expect: Extra inputs");
}

/**
 * Before a memory file is saved by hand, keep the text on disk in history (`memory.snapshot`),
 * so the save can be undone as any other change: such a save kept the text it replaced nowhere.
 * Resolves, never rejects, once the snapshot is taken, or with why not (the save goes on either
 * way); undefined also when there was nothing to keep (no listed memory folder holds `file`, or
 * it is not on disk yet). The request names the file's stamp as the save found it (`expect`):
 * a daemon that reads the file only after the save (the wait ran out) refuses it, where it kept
 * the saved text as the version the user was told was not kept.
 */
export async function snapshotBeforeSave(
  client: MemorydClient,
  file: string,
  dirs: MemoryDirs,
  waitMs: number = SNAPSHOT_WAIT_MS,
): Promise<string | undefined> {
  const cwd = dirs.projectOf(file);
  const expect = cwd === undefined ? undefined : fileStamp(file);
  if (cwd === undefined || expect === undefined) {
    return undefined;
  }
  const deadline = Date.now() + waitMs;
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<string>((resolve) => {
    timer = setTimeout(() => resolve(`memoryd did not answer memory.snapshot within ${waitMs} ms`), waitMs);
  });
  const snapshot = client.call("memory.snapshot", { cwd, path: file, expect }).then(
    () => undefined,
    (error: unknown) => {
      const left = deadline - Date.now();
      if (!refusesExpect(error) || left <= 0) {
        return snapshotProblem(error);
      }
      // Unstamped, this one is kept whenever the daemon reads it: asked only within the wait,
      // and not sent again after it (`timeoutMs`, which bounds the resend of a -32006 too).
      return client.call("memory.snapshot", { cwd, path: file }, { timeoutMs: left }).then(
        () => undefined,
        (again: unknown) => snapshotProblem(again),
      );
    },
  );
  try {
    return await Promise.race([snapshot, late]);
  } finally {
    clearTimeout(timer);
  }
}

/** Why a snapshot failed, in words; undefined when there was nothing to keep. */
export function snapshotProblem(error: unknown): string | undefined {
  if (error instanceof RpcError && error.code === -32001) {
    return undefined; // no such file any more: nothing to keep
  }
  if (error instanceof RpcError && error.code === -32601) {
    return "the running memoryd is older than this extension (no memory.snapshot); `memctl restart` runs the installed one";
  }
  return errorText(error);
}

/** The memory dir a file is in, if it is one the list knows (a save there is reconciled). */
export function inMemoryDir(file: string, memoryDirs: Iterable<string>): string | undefined {
  for (const dir of memoryDirs) {
    const rel = shortPath(file, dir);
    if (rel !== file && file.endsWith(".md")) {
      return dir;
    }
  }
  return undefined;
}
