// Small text helpers shared by the views (same wording as `memctl memory`).
import * as path from "node:path";

import { RpcError } from "./rpcClient";

/** 'now', '5m', '3h', '2d', '6w': how long ago `mtime` (seconds since the epoch) was. */
export function age(mtimeS: number | null | undefined, nowMs: number = Date.now()): string {
  if (mtimeS === null || mtimeS === undefined || !Number.isFinite(mtimeS)) {
    return "?";
  }
  const seconds = Math.max(0, nowMs / 1000 - mtimeS);
  for (const [unit, size] of [
    ["w", 7 * 86400],
    ["d", 86400],
    ["h", 3600],
    ["m", 60],
  ] as const) {
    if (seconds >= size) {
      return `${Math.floor(seconds / size)}${unit}`;
    }
  }
  return "now";
}

/**
 * `file` relative to `base` when it is `base` ("") or below it, else undefined. A name that only
 * begins with two dots (`..notes/CLAUDE.md`) is below: taken for `../`, it was shown whole.
 */
export function within(base: string, file: string): string | undefined {
  const rel = path.relative(base, file);
  const up = rel === ".." || rel.startsWith(".." + path.sep);
  return up || path.isAbsolute(rel) ? undefined : rel;
}

/** A path as a person reads it: relative to `base` when below it, `~` for home. */
export function shortPath(file: string, base?: string, home?: string): string {
  const rel = base ? within(base, file) : undefined;
  if (rel) {
    return rel;
  }
  if (home && file.startsWith(home.replace(/\/+$/, "") + "/")) {
    return "~/" + file.slice(home.replace(/\/+$/, "").length + 1);
  }
  return file;
}

/**
 * The first `max` characters of `text`, counted in code points: never half of a surrogate pair
 * (an emoji cut in two is sent as a lone surrogate, which the daemon stores as U+FFFD).
 */
export function firstChars(text: string, max: number): string {
  let end = 0;
  let count = 0;
  for (const char of text) {
    if (count === max) {
      break;
    }
    end += char.length;
    count += 1;
  }
  return text.slice(0, end);
}

/** How many characters (code points) `text` holds. */
export function charCount(text: string): number {
  return [...text].length;
}

export function errorText(error: unknown): string {
  return error instanceof Error ? error.message + olderDaemonHint(error) : String(error);
}

/**
 * What to add to the daemon's error when it may be older than the extension (running since
 * before an upgrade): the extension only calls methods and sends fields the protocol has, so
 * "method not found" or an unknown field means the daemon lacks them; alone, either reads as a bug.
 */
export function olderDaemonHint(error: Error): string {
  const code = error instanceof RpcError ? error.code : undefined;
  if (code === -32601 || (code === -32602 && error.message.includes("Extra inputs are not permitted"))) {
    return " (the running memoryd may be older than this extension, started before an upgrade: `memctl restart` runs the installed one)";
  }
  return "";
}

// What would make one line several (a name posing as more rows), what a terminal or a tooltip
// would act on rather than show (C0, DEL, C1), and the bidi embeddings, overrides and isolates
// that show text in another order than it is stored (a U+202E in a teammate's memory name).
const LINE_BREAKS: Record<string, string> = { "\n": "\\n", "\r": "\\r", "\t": "\\t" };
const UNSHOWN = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

/**
 * `text` for a one-line place (a tree row, a quick-pick row, a message): line breaks and tabs
 * as `\n`, `\r`, `\t`; other control characters as `\x1b`; U+2028/U+2029 and the bidi
 * controls as `\u202e` (as `memctl` shows them).
 */
export function oneLine(text: string): string {
  return text.replace(UNSHOWN, (c) => {
    const code = c.charCodeAt(0);
    return LINE_BREAKS[c] ?? (code < 0x100 ? `\\x${code.toString(16).padStart(2, "0")}` : `\\u${code.toString(16)}`);
  });
}

const BIDI = /[\u202a-\u202e\u2066-\u2069]/g;

// What Python's str.split() splits on (memfile.as_field's `" ".join(text.split())`): JS's \s
// differs (it holds U+FEFF, which Python keeps, and lacks U+001C-U+001F and U+0085).
const PYTHON_SPACE = /[\t-\r\x1c-\x1f \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+/;

/**
 * `text` as memoryd takes a memory's name or description it derives itself (its
 * `memfile.as_field`): the bidi controls dropped, every other character `oneLine` escapes a
 * space, each run of spaces (as Python splits on them) one space, none at either end. For the
 * fields the extension derives from the text (the suggested name, the description):
 * `memory.write` refuses those characters in a field, and the user never wrote these as one.
 */
export function asField(text: string): string {
  return text.replace(BIDI, "").replace(UNSHOWN, " ").split(PYTHON_SPACE).filter(Boolean).join(" ");
}

/**
 * `text` for a VS Code notification: one line, and no markdown link. VS Code turns
 * `[label](command:…)` in a message into a link that runs the command with its arguments, so a
 * memory name, a path or a daemon message holding one would be a button that runs what its
 * author chose; a space between `]` and `(` leaves the words as they are and makes no link.
 */
export function messageText(text: string): string {
  return oneLine(text).replace(/\]\(/g, "] (");
}
