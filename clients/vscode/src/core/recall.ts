// Recall: the query is the selection, else the word under the cursor, else what the user types;
// up to 5 memories from `recall`, each shown with its name, type, age, staleness note and what
// the local ranker saw in it (`explain`).
import type { ProjectTarget } from "./editorContext";
import { age, firstChars, oneLine } from "./format";
import type { MemorydClient } from "./rpcClient";
import type { RecallResult, RecallWhy, RecalledMemory } from "./types";

export const RECALL_LIMIT = 5;

/** The default query: a non-blank selection wins over the word at the cursor; at most 500
 * characters (code points: an emoji at the cut is kept whole or left out, never halved). */
export function defaultQuery(selection: string | undefined, wordAtCursor: string | undefined): string {
  const picked = (selection ?? "").trim() || (wordAtCursor ?? "").trim();
  return firstChars(picked.replace(/\s+/g, " "), 500);
}

export function recallParams(target: ProjectTarget, query: string, selector?: "auto" | "local"): Record<string, unknown> {
  const trimmed = query.trim();
  if (!trimmed) {
    throw new Error("nothing to recall: select some text, put the cursor on a word, or type a query");
  }
  const params: Record<string, unknown> = { cwd: target.cwd, query: trimmed, limit: RECALL_LIMIT, explain: true };
  if (selector) {
    params.selector = selector;
  }
  return params;
}

export async function recall(
  client: MemorydClient,
  target: ProjectTarget,
  query: string,
  options: { selector?: "auto" | "local"; timeoutMs?: number } = {},
): Promise<RecallResult> {
  const result = await client.call<RecallResult>(
    "recall",
    recallParams(target, query, options.selector),
    options.timeoutMs ? { timeoutMs: options.timeoutMs } : undefined,
  );
  return { ...result, memories: (result.memories ?? []).slice(0, RECALL_LIMIT) };
}

export interface RecallPick {
  label: string;
  description: string;
  detail: string;
  path: string;
  memory: RecalledMemory;
}

/** What to show when recall returned nothing: why the daemon did not rank the query, if it says. */
export function emptyRecallMessage(result: RecallResult, query: string): string {
  return result.not_ranked ? `memoryd: not ranked: ${result.not_ranked}` : `memoryd: no memory about "${query}"`;
}

/**
 * `words deploy, canary · near grandma · pasted decoder · feedback rollout · date 2023-08-20
 * (dated as asked) · lexical 1.00 · semantic 0.71 · cosine 0.42`
 */
export function whyText(why: RecallWhy): string {
  const parts = [`words ${why.words.length ? why.words.join(", ") : "none"}`];
  if (why.near_words?.length) {
    parts.push(`near ${why.near_words.join(", ")}`);
  }
  if (why.pasted_words?.length) {
    parts.push(`pasted ${why.pasted_words.join(", ")}`);
  }
  if (why.feedback_terms?.length) {
    parts.push(`feedback ${why.feedback_terms.join(", ")}`);
  }
  if (why.date) {
    // a date read off the file's last write says so first
    const notes = [...(why.date_from === "file" ? ["file time"] : []), ...(why.date_signals ?? [])];
    parts.push(`date ${why.date}${notes.length ? ` (${notes.join(", ")})` : ""}`);
  }
  for (const name of ["lexical", "semantic", "cosine"] as const) {
    const value = why[name];
    if (typeof value === "number") {
      parts.push(`${name} ${value.toFixed(2)}`);
    }
  }
  return parts.join(" · ");
}

/** One quick-pick row per memory: name; type · age (· stale) (· what the ranker saw); the
 * staleness note or description. */
export function recallPicks(result: RecallResult, nowMs: number = Date.now()): RecallPick[] {
  return result.memories.map((memory) => {
    const kind = memory.team ? `team/${memory.type}` : memory.type;
    const note = memory.stale && memory.note ? `⚠ ${memory.note}` : memory.description;
    const why = memory.why ? ` · ${whyText(memory.why)}` : "";
    return {
      label: oneLine(memory.name ?? ""),
      description: oneLine(`${kind} · ${age(memory.mtime, nowMs)}${memory.stale ? " · stale" : ""}${why}`),
      detail: oneLine(note ?? ""),
      path: memory.path,
      memory,
    };
  });
}

/** The text opened in an editor for one recalled memory: its staleness note first, then the file. */
export function recallDocument(memory: RecalledMemory): string {
  const note = memory.stale && memory.note ? `<!-- ${memory.note} -->\n` : "";
  return note + memory.content;
}
