// "Rules in effect": get_context for the active file's folder with the file as touched_paths,
// shown as the instruction files by type in load order, @include tree under the including file,
// conditional rules with the globs that matched, and what was skipped with the daemon's reason.
import * as path from "node:path";

import type { ProjectTarget } from "./editorContext";
import { shortPath, within } from "./format";
import type { MemorydClient } from "./rpcClient";
import type { ContextResult, InstructionFile, SkippedFile } from "./types";
import type { ViewNode } from "./viewNode";

/** Instruction file groups in load order (as `memctl memory`). */
export const GROUP_ORDER = ["Managed", "User", "Project", "Local", "AutoMem", "TeamMem"];
const GROUP_TITLES: Record<string, string> = {
  Managed: "Managed (policy)",
  User: "User",
  Project: "Project",
  Local: "Local",
  AutoMem: "Auto memory index",
  TeamMem: "Team memory index",
};

const SKIP_REASONS: Record<string, string> = {
  paths_not_matched: "conditional rule, no path matched",
  missing: "missing",
  external: "outside the project (not approved)",
  cycle: "include cycle",
  duplicate: "already loaded",
  depth: "include too deep",
  excluded: "excluded by claudeMdExcludes",
  too_large: "too large",
  too_many: "too many rule files",
  bad_frontmatter: "bad frontmatter",
  binary: "binary",
  not_utf8: "not UTF-8",
  not_text: "not a text file",
  not_a_file: "not a file",
  unreadable: "unreadable",
  symlink_loop: "symlink loop",
  agents_md_disabled: "AGENTS.md fallback off",
  provider_error: "provider error",
};

export function contextParams(target: ProjectTarget, sessionId?: string): Record<string, unknown> {
  const params: Record<string, unknown> = { cwd: target.cwd, touched_paths: target.touchedPaths };
  if (sessionId) {
    params.session_id = sessionId;
  }
  return params;
}

export function getContext(client: MemorydClient, target: ProjectTarget, timeoutMs?: number): Promise<ContextResult> {
  return client.call<ContextResult>("get_context", contextParams(target), timeoutMs ? { timeoutMs } : undefined);
}

/** Why a loaded file applies, in words. */
export function loadedBecause(file: InstructionFile, target: ProjectTarget): string {
  switch (file.reason) {
    case "session_start":
      return "always loaded";
    case "nested":
      return "nested: in a folder of the open file";
    case "include":
      return file.parent ? `@include from ${path.basename(file.parent)}` : "@include";
    case "path_glob": {
      const globs = (file.globs ?? []).join(", ");
      const touched = target.touchedPaths.map((p) => shortPath(p, target.root ?? target.cwd)).join(", ");
      return touched ? `paths: ${globs} matched ${touched}` : `paths: ${globs} matched`;
    }
    default:
      return file.reason;
  }
}

export function skippedBecause(skip: SkippedFile): string {
  return SKIP_REASONS[skip.reason] ?? skip.reason;
}

/** The rules view: one group per file type, includes nested, then Skipped and Warnings. */
export function rulesTree(ctx: ContextResult, target: ProjectTarget, home?: string): ViewNode[] {
  const files = ctx.files ?? [];
  const listed = new Set(files.map((f) => f.path));
  const childrenOf = new Map<string, InstructionFile[]>();
  const roots: InstructionFile[] = [];
  for (const file of files) {
    if (file.parent && listed.has(file.parent) && file.parent !== file.path) {
      const siblings = childrenOf.get(file.parent) ?? [];
      siblings.push(file);
      childrenOf.set(file.parent, siblings);
    } else {
      roots.push(file);
    }
  }
  const seen = new Set<string>();
  const fileNode = (file: InstructionFile): ViewNode => {
    seen.add(file.path);
    const kids = (childrenOf.get(file.path) ?? []).filter((k) => !seen.has(k.path));
    const because = loadedBecause(file, target);
    return {
      id: `file:${file.path}`,
      label: shortPath(file.path, target.root ?? target.cwd, home),
      description: `${file.type} · ${because}`,
      tooltip: `${file.path}\n${file.type} instructions, ${because}`,
      path: file.path,
      icon: file.reason === "path_glob" ? "filter" : file.reason === "include" ? "references" : "file",
      contextValue: "ruleFile",
      children: kids.map(fileNode),
    };
  };
  const groups = new Map<string, InstructionFile[]>();
  for (const file of roots) {
    const list = groups.get(file.type) ?? [];
    list.push(file);
    groups.set(file.type, list);
  }
  const order = [...GROUP_ORDER, ...[...groups.keys()].filter((g) => !GROUP_ORDER.includes(g)).sort()];
  const nodes: ViewNode[] = [];
  for (const group of order) {
    const members = groups.get(group);
    if (!members) {
      continue;
    }
    nodes.push({
      id: `group:${group}`,
      label: GROUP_TITLES[group] ?? group,
      description: `${members.length} file${members.length === 1 ? "" : "s"}`,
      icon: "folder",
      children: members.map(fileNode),
    });
  }
  if (!nodes.length) {
    nodes.push({ id: "none", label: "No instruction files apply here", icon: "info" });
  }
  const skipped = ctx.skipped ?? [];
  if (skipped.length) {
    nodes.push({
      id: "skipped",
      label: "Skipped",
      description: `${skipped.length}`,
      icon: "circle-slash",
      children: skipped.map((skip, i) => ({
        id: `skipped:${i}:${skip.path}`,
        label: shortPath(skip.path, target.root ?? target.cwd, home),
        description: skippedBecause(skip),
        tooltip: [skip.path, skip.detail ?? "", skip.parent ? `included from ${skip.parent}` : ""]
          .filter(Boolean)
          .join("\n"),
        path: skip.reason === "missing" ? undefined : skip.path,
        icon: "circle-slash",
        contextValue: "skippedFile",
      })),
    });
  }
  const warnings = ctx.warnings ?? [];
  if (warnings.length) {
    nodes.push({
      id: "warnings",
      label: "Warnings",
      icon: "warning",
      children: warnings.map((w, i) => ({ id: `warning:${i}`, label: w, tooltip: w, icon: "warning" })),
    });
  }
  return nodes;
}

/**
 * Whether a context/changed of `project` (the daemon's real path of a project root) is about
 * the view of `target`: its folder is the project or below it. `realpath` (the target's folder
 * reached through a link) is tried when the folder as opened is not.
 */
export function concernsTarget(project: unknown, target: ProjectTarget, realpath?: (p: string) => string): boolean {
  if (typeof project !== "string" || !project) {
    return false;
  }
  const inProject = (dir: string) => within(project, dir) !== undefined;
  if (inProject(target.cwd)) {
    return true;
  }
  try {
    return realpath !== undefined && inProject(realpath(target.cwd));
  } catch {
    return false; // the folder is gone
  }
}

/** Every file the view shows, so a save of one of them refreshes the view. */
export function watchedFiles(ctx: ContextResult): Set<string> {
  return new Set([...(ctx.files ?? []).map((f) => f.path), ...(ctx.skipped ?? []).map((s) => s.path)]);
}
