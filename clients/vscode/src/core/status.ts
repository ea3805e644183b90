// The status bar: daemon up/down, model configured or not, team sync state (`status`, and
// `team.status` for the active project).
import { errorText, oneLine } from "./format";
import type { MemorydClient } from "./rpcClient";
import { RpcError } from "./rpcClient";
import type { StatusResult, TeamStatusResult } from "./types";

export interface StatusView {
  up: boolean;
  text: string;
  tooltip: string;
  /** What needs the user's attention while the daemon is up (another daemon of theirs runs). */
  warning?: string;
}

/** A word for a POSIX shell as `memctl` quotes it (Python's shlex.quote). */
export function shellQuote(word: string): string {
  if (word === "") {
    return "''";
  }
  return /[^A-Za-z0-9_@%+=:,./-]/.test(word) ? `'${word.replace(/'/g, `'"'"'`)}'` : word;
}

/**
 * `status.other_daemon` in words, as `memctl status` prints it: another daemon of this user runs
 * on another socket, with how to keep one; undefined when there is none.
 */
export function otherDaemonWarning(status: Pick<StatusResult, "other_daemon">): string | undefined {
  const other = status.other_daemon;
  if (!other || typeof other !== "object") {
    return undefined;
  }
  const pid = typeof other.pid === "number" ? `pid ${other.pid}` : "pid unknown";
  let text = `another memoryd of this user (${pid}) is running`;
  if (typeof other.socket === "string") {
    text += ` on ${other.socket}; keep one: memctl --socket ${shellQuote(other.socket)} stop`;
  }
  return oneLine(text);
}

export type TeamState = { kind: "off"; reason: string } | { kind: "on"; status: TeamStatusResult } | { kind: "unknown" };

export async function teamState(client: MemorydClient, cwd: string | undefined): Promise<TeamState> {
  if (!cwd) {
    return { kind: "unknown" };
  }
  try {
    const status = await client.call<TeamStatusResult>("team.status", { cwd });
    return status.repo ? { kind: "on", status } : { kind: "off", reason: "this project has no team repository" };
  } catch (error) {
    if (error instanceof RpcError && error.code === -32003) {
      return { kind: "off", reason: error.message };
    }
    return { kind: "unknown" };
  }
}

function teamText(team: TeamState): [string, string] {
  switch (team.kind) {
    case "off":
      return ["team off", `Team sync: off — ${team.reason}`];
    case "unknown":
      return ["", "Team sync: unknown (no project open)"];
    case "on": {
      const s = team.status;
      const last = s.last_result;
      const failed = last && !last.ok;
      const pending = s.pending?.length ?? 0;
      const short = failed ? "team error" : s.retrying ? "team retrying" : pending ? `team ${pending} pending` : "team synced";
      const detail = last ? `last ${last.op} ${last.ok ? "ok" : "failed"} at ${last.at}${last.error ? `: ${last.error}` : ""}` : "not synced yet";
      return [short, `Team sync: ${s.repo} via ${s.server} — ${detail}; ${s.entries} entries, ${pending} pending`];
    }
  }
}

/** Status bar text and tooltip for a daemon that answered `status`. */
export function statusView(status: StatusResult, team: TeamState): StatusView {
  const model = status.model?.configured ? `model ${status.model.model ?? "on"}` : "no model";
  const [teamShort, teamLong] = teamText(team);
  const errors = Object.keys(status.worker_errors ?? {}).length;
  const parts = ["memoryd", model, teamShort, errors ? `${errors} worker error${errors === 1 ? "" : "s"}` : ""].filter(Boolean);
  const other = otherDaemonWarning(status);
  const tooltip = [
    `memoryd ${status.version} (protocol ${status.protocol_version}), pid ${status.pid}, up ${Math.round(status.uptime_s)} s`,
    `Socket: ${status.socket}`,
    ...(other ? [`Warning: ${other} (hooks and editors whose socket names it talk to it, not to this one)`] : []),
    status.model?.configured ? `Model: ${status.model.model ?? "configured"}` : `Model: not configured — ${status.model?.reason ?? ""}`,
    teamLong,
  ];
  return { up: true, text: `$(database) ${parts.join(" · ")}`, tooltip: tooltip.join("\n"), ...(other ? { warning: other } : {}) };
}

export function downView(socketPath: string, reason: string | undefined): StatusView {
  return {
    up: false,
    text: "$(debug-disconnect) memoryd down",
    tooltip: `memoryd is not answering on ${socketPath}${reason ? `\n${reason}` : ""}\nClick to start it (memctl start).`,
  };
}

/** Ask the daemon (and the project's team sync); a failure becomes the "down" view. */
export async function fetchStatus(client: MemorydClient, cwd: string | undefined): Promise<StatusView> {
  try {
    const status = await client.call<StatusResult>("status");
    return statusView(status, await teamState(client, cwd));
  } catch (error) {
    return downView(client.socketPath, errorText(error));
  }
}
