// Small text helpers shared by the views (same wording as `memctl memory`).
import * as path from "node:path";

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

/** A path as a person reads it: relative to `base` when below it, `~` for home. */
export function shortPath(file: string, base?: string, home?: string): string {
  if (base) {
    const rel = path.relative(base, file);
    if (rel && !rel.startsWith("..") && !path.isAbsolute(rel)) {
      return rel;
    }
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
  return error instanceof Error ? error.message : String(error);
}
