// Daemon notifications as editor messages: one line each for memory/saved,
// session/summary_updated, team/synced, team problems and worker errors, rate-limited so a
// storm shows a few messages and one summary instead of a thousand toasts.
import * as path from "node:path";

import type { Notification } from "./rpcClient";

export type Level = "info" | "warning" | "error";

export interface Message {
  level: Level;
  text: string;
}

/** The events the editor subscribes to (context/changed refreshes the views, shown as nothing). */
export const EVENTS = [
  "memory/saved",
  "session/summary_updated",
  "team/synced",
  "team/secret_blocked",
  "team/conflict",
  "worker/error",
  "context/changed",
];

/**
 * The events of `wanted` a daemon that refused them knows, when it refused some as unknown
 * (one older than context/changed refuses the whole set: -32602 "…; known: a, b"); undefined
 * when the refusal is no such answer or leaves nothing out.
 */
export function knownEvents(error: unknown, wanted: readonly string[]): string[] | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  const message = (error as { message?: unknown } | null)?.message;
  if (code !== -32602 || typeof message !== "string") {
    return undefined;
  }
  const known = /; known: (.+)$/.exec(message);
  if (!known) {
    return undefined;
  }
  const names = new Set(known[1]!.split(/[,\s]+/).filter(Boolean));
  const kept = wanted.filter((event) => names.has(event));
  return kept.length < wanted.length ? kept : undefined;
}

function str(value: unknown): string {
  return typeof value === "string" ? value : value === undefined || value === null ? "" : JSON.stringify(value);
}

function count(value: unknown): string {
  return Array.isArray(value) ? String(value.length) : str(value) || "0";
}

/** The message for one notification, or null for events the editor does not show. */
export function describe(notification: Notification): Message | null {
  const p = notification.params;
  switch (notification.method) {
    case "memory/saved":
      return { level: "info", text: `memoryd: memory saved: ${path.basename(str(p.path))}` };
    case "session/summary_updated":
      return { level: "info", text: `memoryd: session summary updated (${str(p.session_id)})` };
    case "team/synced":
      return { level: "info", text: `memoryd: team synced ${str(p.repo)} (pushed ${count(p.pushed)}, pulled ${count(p.pulled)})` };
    case "team/secret_blocked":
      return { level: "warning", text: `memoryd: ${path.basename(str(p.path))} not uploaded: secret rule ${str(p.rule)} matched` };
    case "team/conflict":
      return { level: "warning", text: `memoryd: team conflict on ${path.basename(str(p.path))}; your copy kept as ${path.basename(str(p.saved_as))}` };
    case "worker/error":
      return { level: "error", text: `memoryd: ${str(p.worker)} failed: ${str(p.message)}` };
    default:
      return null;
  }
}

export interface RateLimit {
  /** At most this many messages per window... */
  perWindow: number;
  windowMs: number;
}

export const DEFAULT_RATE_LIMIT: RateLimit = { perWindow: 3, windowMs: 5_000 };

/**
 * Shows at most `perWindow` messages per window; what is held back is counted and shown as one
 * summary line when the window ends. `show` must not throw; the clock and timers are injectable.
 */
export class NotificationPresenter {
  private windowStart = -Infinity;
  private shownInWindow = 0;
  private suppressed = 0;
  private flushTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly show: (message: Message) => void,
    private readonly limit: RateLimit = DEFAULT_RATE_LIMIT,
    private readonly now: () => number = Date.now,
  ) {}

  get heldBack(): number {
    return this.suppressed;
  }

  handle(notification: Notification): void {
    const message = describe(notification);
    if (!message) {
      return;
    }
    const t = this.now();
    if (t - this.windowStart >= this.limit.windowMs) {
      this.windowStart = t;
      this.shownInWindow = 0;
    }
    if (this.shownInWindow < this.limit.perWindow) {
      this.shownInWindow += 1;
      this.show(message);
      return;
    }
    this.suppressed += 1;
    if (!this.flushTimer) {
      const wait = Math.max(0, this.windowStart + this.limit.windowMs - t);
      this.flushTimer = setTimeout(() => this.flush(), wait);
      this.flushTimer.unref();
    }
  }

  /** Show the summary of what was held back (also called when the window ends). */
  flush(): void {
    if (this.flushTimer) {
      clearTimeout(this.flushTimer);
      this.flushTimer = undefined;
    }
    if (this.suppressed) {
      const n = this.suppressed;
      this.suppressed = 0;
      this.windowStart = this.now();
      this.shownInWindow = 1;
      this.show({ level: "info", text: `memoryd: ${n} more notification${n === 1 ? "" : "s"} not shown (see memctl watch)` });
    }
  }

  dispose(): void {
    if (this.flushTimer) {
      clearTimeout(this.flushTimer);
      this.flushTimer = undefined;
    }
  }
}
