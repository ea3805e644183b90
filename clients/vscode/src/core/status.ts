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
  /**
   * What needs the user's attention while the daemon is up: another daemon of theirs runs, or
   * the daemon stopped the project's team sync (`team.status.suppressed` with a repo).
   */
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

const text = (value: unknown): string | undefined => (typeof value === "string" && value ? value : undefined);

/** Why a configured model's calls fail and what mends it (`status.model.problem`), one line. */
export function modelProblem(status: Pick<StatusResult, "model" | "features">): string | undefined {
  const problem = text(status.model?.problem) ?? text(status.features?.model?.problem);
  return problem === undefined ? undefined : oneLine(problem);
}

/**
 * `status.problems`, one line each, without the model's problem or reason, which the model line
 * says already; [] from a daemon older than the field.
 */
export function setupProblems(status: Pick<StatusResult, "model" | "problems">): string[] {
  const list: unknown = status.problems;
  if (!Array.isArray(list)) {
    return [];
  }
  const said = new Set([status.model?.problem, status.model?.reason]);
  return list.filter((p): p is string => text(p) !== undefined && !said.has(p)).map(oneLine);
}

/**
 * `team.status.suppressed` in words, for a daemon older than `team.status.why` (session 20),
 * which says it itself (memoryd.team.service.SUPPRESSED_BECAUSE).
 */
const SUPPRESSED_BECAUSE: Record<string, string> = {
  no_repo: "the project has no git remote naming its owner/repo, which team memory is keyed by",
  no_oauth: "MEMORYD_TEAM_TOKEN is not set",
  bad_url: "MEMORYD_TEAM_URL is not an http(s) URL",
  bad_token: "MEMORYD_TEAM_TOKEN is not a usable token",
};

/**
 * Why a folder's team sync is off or stopped, with its code and what lifts it: a setting fixed
 * and a restart, a git remote added, or, after the server refused (`http_401`, `permanent`), a
 * file in team/ deleted or a restart once the cause is fixed. Only for a daemon older than
 * `team.status.why`: `whyOff` shows the daemon's own words when it sends them.
 */
export function whySuppressed(code: string): string {
  const shown = oneLine(code);
  if (Object.prototype.hasOwnProperty.call(SUPPRESSED_BECAUSE, code)) {
    const fix = code === "no_repo" ? "add one" : "fix it and restart memoryd";
    return `${SUPPRESSED_BECAUSE[code]} (${shown}); ${fix}`;
  }
  const http = /^http_(\d+)$/.exec(code);
  const refused = http ? `the team server answered HTTP ${http[1]}` : "the team server refused for good";
  return `${refused}, so sync stopped (${shown}); delete a file in team/ or restart memoryd to try again once the cause is fixed`;
}

/** Why the folder's team sync is off or stopped: the daemon's `why`, else `whySuppressed(code)`. */
export function whyOff(status: Pick<TeamStatusResult, "why">, code: string): string {
  const why = text(status.why);
  return why === undefined ? whySuppressed(code) : oneLine(why);
}

/** `unknown`: no project open, or (with `reason`) the daemon did not answer team.status. */
export type TeamState = { kind: "off"; reason: string } | { kind: "on"; status: TeamStatusResult } | { kind: "unknown"; reason?: string };

export async function teamState(client: MemorydClient, cwd: string | undefined): Promise<TeamState> {
  if (!cwd) {
    return { kind: "unknown" };
  }
  try {
    const status = await client.call<TeamStatusResult>("team.status", { cwd });
    if (!status.repo) {
      return { kind: "off", reason: whyOff(status, status.suppressed || "no_repo") };
    }
    return { kind: "on", status };
  } catch (error) {
    if (error instanceof RpcError && error.code === -32003) {
      return { kind: "off", reason: error.message };
    }
    // a daemon older than team.status, one failing or slow: said (it read "no project open")
    return { kind: "unknown", reason: errorText(error) };
  }
}

function teamText(team: TeamState): [string, string] {
  switch (team.kind) {
    case "off":
      return ["team off", `Team sync: off — ${team.reason}`];
    case "unknown":
      return ["", team.reason === undefined ? "Team sync: unknown (no project open)" : `Team sync: unknown — ${oneLine(team.reason)}`];
    case "on": {
      const s = team.status;
      const last = s.last_result;
      const failed = last && !last.ok;
      const pending = s.pending?.length ?? 0;
      const stopped = typeof s.suppressed === "string" && s.suppressed ? s.suppressed : undefined;
      // a stopped sync first: its folder has a repo, nothing syncs however the rest reads
      const short = stopped
        ? `team stopped (${oneLine(stopped)})`
        : failed
          ? "team error"
          : s.retrying
            ? "team retrying"
            : pending
              ? `team ${pending} pending`
              : "team synced";
      const detail = last ? `last ${last.op} ${last.ok ? "ok" : "failed"} at ${last.at}${last.error ? `: ${oneLine(last.error)}` : ""}` : "not synced yet";
      const state = stopped ? `stopped: ${whyOff(s, stopped)}; ${detail}` : detail;
      return [short, `Team sync: ${s.repo} via ${s.server} — ${state}; ${s.entries} entries, ${pending} pending`];
    }
  }
}

/** The most `Problem:` lines the tooltip (and Show Status) has, as `memctl status` prints. */
export const MAX_PROBLEMS_SHOWN = 20;

/** Status bar text and tooltip for a daemon that answered `status`. */
export function statusView(status: StatusResult, team: TeamState): StatusView {
  const configured = status.model?.configured;
  const failing = configured ? modelProblem(status) : undefined;
  const model = configured ? `model ${status.model.model ?? "on"}${failing ? " failing" : ""}` : "no model";
  const [teamShort, teamLong] = teamText(team);
  const errors = Object.keys(status.worker_errors ?? {}).length;
  const problems = setupProblems(status);
  // every entry of `status.problems`, the model's among them (said on the model line only)
  const listed = Array.isArray(status.problems) ? status.problems.filter((p) => text(p) !== undefined).length : 0;
  const count = listed || (failing ? 1 : 0);
  const parts = [
    "memoryd",
    model,
    teamShort,
    errors ? `${errors} worker error${errors === 1 ? "" : "s"}` : "",
    count ? `${count} problem${count === 1 ? "" : "s"}` : "",
  ].filter(Boolean);
  const other = otherDaemonWarning(status);
  // a team sync the daemon stopped, a failing model or a setup problem needs the user too
  const warning =
    other ??
    (team.kind === "on" && team.status.suppressed ? teamLong : undefined) ??
    (count ? (failing ?? problems[0] ?? oneLine(status.model?.reason ?? "a problem")) : undefined);
  const tooltip = [
    `memoryd ${status.version} (protocol ${status.protocol_version}), pid ${status.pid}, up ${Math.round(status.uptime_s)} s`,
    `Socket: ${status.socket}`,
    ...(other ? [`Warning: ${other} (hooks and editors whose socket names it talk to it, not to this one)`] : []),
    configured
      ? `Model: ${status.model.model ?? "configured"}${failing ? ` — but ${failing}` : ""}`
      : `Model: not configured — ${oneLine(status.model?.reason ?? "")}`,
    teamLong,
    ...problems.slice(0, MAX_PROBLEMS_SHOWN).map((p) => `Problem: ${p}`),
    // an env file of pasted shell lines is one problem a line: 30,000 made a tooltip, and a
    // Show Status message, of 30,000 lines
    ...(problems.length > MAX_PROBLEMS_SHOWN ? [`Problem: … and ${problems.length - MAX_PROBLEMS_SHOWN} more (\`memctl status --json\` lists them all)`] : []),
  ];
  return { up: true, text: `$(database) ${parts.join(" · ")}`, tooltip: tooltip.join("\n"), ...(warning ? { warning } : {}) };
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
