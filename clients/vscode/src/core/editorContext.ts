// Which project the editor is in: the active file's directory (and the file, as touched_paths),
// else the workspace folder. An untitled buffer or a window with no folder gets a clear error.
import * as fs from "node:fs";
import * as path from "node:path";

import { within } from "./format";

export interface EditorState {
  /** The active editor's file on disk, if it has one (not untitled; see `documentFile`). */
  filePath?: string;
  /** The workspace folder holding it, else the first folder. */
  workspaceFolder?: string;
  /**
   * The project a file belongs to when its own folder is not one: a memory file opened from
   * the Memories view or a recall is in the memory folder, which as a `cwd` names another,
   * empty project (the views went blank and Delete was refused as outside the memory folder).
   */
  projectOf?: (file: string) => string | undefined;
}

/** Schemes whose URI path is the path of a file on disk: a notebook's cells, a file at a git ref. */
const FILE_BACKED_SCHEMES = new Set(["vscode-notebook-cell", "vscode-notebook", "git"]);

/**
 * The file on disk a document is about: a `file:` document's path; a notebook cell's notebook
 * and a `git:` view's working-tree file (their URI path is that file's path); else undefined
 * (untitled buffers, output panels, settings, diffs of other kinds).
 */
export function documentFile(uri: { scheme: string; path: string; fsPath: string }, isUntitled = false): string | undefined {
  if (isUntitled) {
    return undefined;
  }
  if (uri.scheme === "file") {
    return uri.fsPath;
  }
  return FILE_BACKED_SCHEMES.has(uri.scheme) && path.isAbsolute(uri.path) ? uri.path : undefined;
}

export interface ProjectTarget {
  cwd: string;
  touchedPaths: string[];
  /** Where paths are shown relative to: the git root above `cwd`, else the workspace folder, else `cwd`. */
  root?: string;
}

export class NoProjectError extends Error {
  constructor() {
    super("memoryd needs a folder: open a file that is saved on disk, or open a folder");
    this.name = "NoProjectError";
  }
}

function isDir(dir: string): boolean {
  try {
    return fs.statSync(dir).isDirectory();
  } catch {
    return false;
  }
}

/** The folder holding `.git` at or above `dir`, if any (only for showing paths shorter). */
export function gitRoot(dir: string): string | undefined {
  for (let current = dir; ; current = path.dirname(current)) {
    if (fs.existsSync(path.join(current, ".git"))) {
      return current;
    }
    if (path.dirname(current) === current) {
      return undefined;
    }
  }
}

function displayRoot(cwd: string, workspaceFolder: string | undefined): string {
  const inside = workspaceFolder && within(workspaceFolder, cwd) !== undefined ? workspaceFolder : undefined;
  return gitRoot(cwd) ?? inside ?? cwd;
}

/** The `cwd` and `touched_paths` for get_context, memory.list, recall and the rest. */
export function projectTarget(state: EditorState): ProjectTarget {
  const project = state.filePath && state.projectOf ? state.projectOf(state.filePath) : undefined;
  if (project && path.isAbsolute(project) && isDir(project)) {
    // the file is not part of the project it is about: no touched_paths
    return { cwd: project, touchedPaths: [], root: displayRoot(project, state.workspaceFolder) };
  }
  if (state.filePath && path.isAbsolute(state.filePath)) {
    const dir = path.dirname(state.filePath);
    if (isDir(dir)) {
      return { cwd: dir, touchedPaths: [state.filePath], root: displayRoot(dir, state.workspaceFolder) };
    }
  }
  if (state.workspaceFolder && path.isAbsolute(state.workspaceFolder) && isDir(state.workspaceFolder)) {
    return { cwd: state.workspaceFolder, touchedPaths: [], root: displayRoot(state.workspaceFolder, state.workspaceFolder) };
  }
  throw new NoProjectError();
}
