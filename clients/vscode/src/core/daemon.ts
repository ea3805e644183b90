// The daemon being down: one clear message per outage (not one per failed call), and starting
// it with `memctl start` on the user's say-so.
import { execFile } from "node:child_process";
import * as fs from "node:fs";

import type { MemorydClient } from "./rpcClient";
import { expandHome } from "./socketPath";

/** Calls `notify` once when the daemon goes down; again only after it was up in between. */
export class DownNotice {
  private shown = false;
  private readonly dispose: () => void;

  constructor(client: MemorydClient, notify: (reason: string) => void) {
    this.dispose = client.onStateChange((state, detail) => {
      if (state === "up") {
        this.shown = false;
      } else if (!this.shown) {
        this.shown = true;
        notify(detail ?? `memoryd is not running on ${client.socketPath}`);
      }
    });
  }

  close(): void {
    this.dispose();
  }
}

export interface StartResult {
  ok: boolean;
  output: string;
}

function isFile(file: string): boolean {
  try {
    return fs.statSync(file).isFile();
  } catch {
    return false;
  }
}

/**
 * Run `memctl --socket SOCKET start` (a no-op when the daemon is healthy). `memctl` is the
 * command from the settings, a leading ~ as the home folder (execFile takes it literally: it was
 * "not found"): a file as it stands is the program (a path with spaces, such as
 * `~/Library/Application Support/…/memctl`, was split into words that name nothing), else it
 * is split on spaces ("python3 -m memctl" works).
 */
export function startDaemon(memctl: string, socketPath: string, env: NodeJS.ProcessEnv = process.env, timeoutMs = 30_000): Promise<StartResult> {
  const whole = expandHome(memctl.trim(), env);
  const [command, ...args] = isFile(whole) ? [whole] : whole.split(/\s+/);
  if (!command) {
    return Promise.resolve({ ok: false, output: "no memctl command configured (memoryd.memctlPath)" });
  }
  return new Promise((resolve) => {
    execFile(command, [...args, "--socket", socketPath, "start"], { env, timeout: timeoutMs }, (error, stdout, stderr) => {
      const output = `${stdout}${stderr}`.trim();
      if (error) {
        const why = (error as NodeJS.ErrnoException).code === "ENOENT" ? `${command} not found: install memoryd or set memoryd.memctlPath` : output || error.message;
        resolve({ ok: false, output: why });
      } else {
        resolve({ ok: true, output });
      }
    });
  });
}
