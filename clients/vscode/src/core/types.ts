// The result shapes of the methods the editor uses (docs/protocol.md), only the fields read here.

export interface InstructionFile {
  path: string;
  type: string;
  parent: string | null;
  reason: string;
  globs: string[] | null;
}

export interface SkippedFile {
  path: string;
  reason: string;
  detail?: string | null;
  parent?: string | null;
}

export interface ContextResult {
  files: InstructionFile[];
  skipped: SkippedFile[];
  memory_dir: string | null;
  index_truncated: boolean;
  warnings: string[];
  cached: boolean;
}

/** What the local ranker saw in a recalled memory (`recall` with `explain`). */
export interface RecallWhy {
  /** The query's own words the memory holds, lower case. */
  words: string[];
  /** Its lexical score as a share of the best memory's (0-1). */
  lexical: number;
  /** The query's words it holds only by their first letters (grandma ~ grandmother). */
  near_words?: string[];
  /** Words of code or output pasted into the query that it holds. */
  pasted_words?: string[];
  /** Terms (stems) pseudo-relevance feedback added to the query that it holds. */
  feedback_terms?: string[];
  /** Its date as the ranker reads it (ISO), if it has one. */
  date?: string;
  /** What raised it: "dated as asked", "says when", "same day as …", "before … (date)". */
  date_signals?: string[];
  /** Where the date comes from: "text" (its first full date) or "file" (its last write). */
  date_from?: "text" | "file";
  /** With embeddings: the model's score fused with the lexical one. */
  semantic?: number;
  /** With embeddings: its pooled cosine to the query. */
  cosine?: number;
}

export interface RecalledMemory {
  path: string;
  name: string;
  description: string;
  type: string;
  mtime: number;
  team: boolean;
  content: string;
  stale: boolean;
  note: string | null;
  /** With `explain`. */
  why?: RecallWhy;
}

export interface RecallResult {
  memories: RecalledMemory[];
  selector: string;
  /** Why the query was not ranked at all ("keep going" names no topic); absent otherwise. */
  not_ranked?: string;
}

export interface ListedMemory {
  path: string;
  file: string;
  name: string | null;
  description: string | null;
  type: string | null;
  mtime: number;
  team: boolean;
  problem: string | null;
}

export interface MemoryListResult {
  instruction_files: InstructionFile[];
  memories: ListedMemory[];
  memory_dir: string;
  team_dir: string | null;
  warnings: string[];
}

export interface WriteResult {
  path: string;
  created: boolean;
  merged_into: string | null;
  /** What the user should know about the write (a secret in it, MEMORY.md not rewritten yet). */
  warnings?: string[];
}

/** `memory.reconcile`: index lines added for files without one, and removed for files gone. */
export interface ReconcileResult {
  added: number;
  removed: number;
  /** One per index left as it was because its owner protected it (since session 24). */
  warnings?: string[];
}

export interface HistoryVersion {
  version: string;
  timestamp: number;
  time: string;
  size: number;
  reason: string;
}

export interface HistoryResult {
  path: string;
  exists: boolean;
  versions: HistoryVersion[];
}

export interface StatusResult {
  version: string;
  protocol_version: number;
  pid: number;
  uptime_s: number;
  socket: string;
  worker_errors: Record<string, unknown>;
  /** `problem`: why a configured model's calls fail, with what mends it (absent before session 19). */
  model: { configured: boolean; reason: string | null; model?: string | null; problem?: string | null };
  features: {
    model?: { enabled: boolean; reason: string | null; problem?: string | null };
    team_sync?: { enabled: boolean; reason: string | null; folders?: number };
    auto_memory?: { enabled: boolean; memories?: number };
  };
  /**
   * Another daemon of this user (same state dir, another socket) that started first: clients
   * whose socket names it talk to it. Null when this one is the first or the only one; its
   * `pid` and `socket` are each null when its note cannot be read. Absent before session 18.
   */
  other_daemon?: { pid: number | null; socket: string | null } | null;
  /** What is wrong with the setup, each saying what to change; absent before session 19. */
  problems?: string[];
}

export interface TeamStatusResult {
  repo: string | null;
  server: string | null;
  team_dir: string;
  last_result: { op: string; ok: boolean; at: string; error?: string } | null;
  /**
   * Why the folder does not sync (null while it does): `no_repo`, `no_oauth`, `bad_url`,
   * `bad_token` (never started), `http_<status>` or `permanent` (the server refused for good).
   */
  suppressed?: string | null;
  /**
   * With `suppressed`: what it means and what lifts it, in the daemon's words (its `why_off`);
   * absent before session 20, when `whySuppressed` words the code instead.
   */
  why?: string;
  pending: string[];
  entries: number;
  retrying: boolean;
}
