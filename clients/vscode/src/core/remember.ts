// Remember: save the selection or a typed line with `memory.write` (type picked by the user),
// as a team memory (`team: true`) only when the project has team sync.
import type { ProjectTarget } from "./editorContext";
import { asField, charCount, firstChars } from "./format";
import type { Message } from "./notifications";
import type { MemorydClient } from "./rpcClient";
import { ProtocolError, RpcError } from "./rpcClient";
import type { TeamStatusResult, WriteResult } from "./types";

export const MEMORY_TYPES = [
  { type: "user", detail: "who the user is: role, goals, how they like to work" },
  { type: "feedback", detail: "a correction or a confirmed approach (Why / How to apply)" },
  { type: "project", detail: "ongoing work, decisions, deadlines the code does not show" },
  { type: "reference", detail: "where something lives outside the repo: dashboards, runbooks" },
] as const;

export type MemoryType = (typeof MEMORY_TYPES)[number]["type"];

const NAME_CHARS = 60;
const DESCRIPTION_CHARS = 150;

/** The first line with words, as a name or description may hold it (no control characters). */
function firstLine(text: string): string {
  return (text.split("\n").map(asField).find((line) => line) ?? "").replace(/^[#>*\-\s]+/, "");
}

/** At most `max` characters (code points, so an emoji is never cut in half), "…" when cut. */
function clip(text: string, max: number): string {
  return charCount(text) <= max ? text : `${firstChars(text, max - 1).trimEnd()}…`;
}

/** A name for the memory when the user gives none: its first line, short. */
export function suggestedName(text: string): string {
  return clip(firstLine(text), NAME_CHARS);
}

export interface RememberInput {
  type: MemoryType;
  text: string;
  name?: string;
  description?: string;
  team?: boolean;
}

export function writeParams(target: ProjectTarget, input: RememberInput): Record<string, unknown> {
  const body = input.text.trim();
  if (!body) {
    throw new Error("nothing to remember: select some text or type a line");
  }
  if (!MEMORY_TYPES.some((t) => t.type === input.type)) {
    throw new Error(`unknown memory type ${JSON.stringify(input.type)}`);
  }
  const name = (input.name ?? "").trim() || suggestedName(body);
  const description = (input.description ?? "").trim() || clip(firstLine(body), DESCRIPTION_CHARS);
  const params: Record<string, unknown> = { cwd: target.cwd, type: input.type, name, description, body };
  if (input.team) {
    params.team = true;
  }
  return params;
}

export async function remember(client: MemorydClient, target: ProjectTarget, input: RememberInput): Promise<WriteResult> {
  const result = await client.call<WriteResult>("memory.write", writeParams(target, input));
  if (typeof result !== "object" || result === null || typeof result.path !== "string") {
    // said, not shown as "Updated memory undefined"
    throw new ProtocolError(`memoryd answered memory.write with ${JSON.stringify(result)?.slice(0, 80)}, not the saved memory's path`);
  }
  return result;
}

/** The project's team sync, or null when it has none (not configured, or no repository). */
export async function teamSync(client: MemorydClient, target: ProjectTarget): Promise<TeamStatusResult | null> {
  try {
    const status = await client.call<TeamStatusResult>("team.status", { cwd: target.cwd });
    return status && status.repo ? status : null;
  } catch (error) {
    if (error instanceof RpcError && error.code === -32003) {
      return null; // team sync is not configured
    }
    throw error;
  }
}

/** Where the memory was saved, in words. */
export function savedMessage(result: WriteResult, team: boolean): string {
  const where = team ? "team memory" : "memory";
  if (result.merged_into) {
    return `Updated the existing ${where} ${result.merged_into} (a near duplicate)`;
  }
  return `${result.created ? "Saved" : "Updated"} ${where} ${result.path}`;
}

/**
 * What to tell the user after a write: where it was saved and, as a warning, what the daemon
 * warned about (the text looks like it holds a secret, `MEMORY.md` could not be rewritten, a
 * team memory whose folder does not sync); before, only "Saved memory …" was said.
 */
export function savedNotice(result: WriteResult, team: boolean): Message {
  const warnings = (result.warnings ?? []).filter((w) => typeof w === "string" && w);
  const saved = savedMessage(result, team);
  return warnings.length ? { level: "warning", text: `${saved}; ${warnings.join("; ")}` } : { level: "info", text: saved };
}
