// A folder, regular file or FIFO where the socket should be (a mistyped memoryd.socketPath or
// MEMORYD_SOCKET): connecting to one is ECONNREFUSED on Linux, which was retried for a second as
// a daemon restarting and then said only "not running (ECONNREFUSED)". It is said at the first
// attempt, in memoryd_client's words, naming what is there.
import * as assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import * as fs from "node:fs";
import * as net from "node:net";
import * as path from "node:path";
import { after, describe, test } from "node:test";

import { DaemonUnavailable, MemorydClient, notASocket } from "../src/core/rpcClient";
import { PYTHON, cleanup, tempDir } from "./helpers";

describe("no socket at the socket path", () => {
  const tmp = tempDir();
  after(() => cleanup(tmp));

  const kinds: Array<[string, string, (p: string) => void]> = [
    ["folder", "a folder", (p) => fs.mkdirSync(p)],
    ["regular file", "a regular file", (p) => fs.writeFileSync(p, "notes\n")],
    ["FIFO", "a FIFO", (p) => execFileSync("mkfifo", [p])],
  ];
  for (const [name, said, make] of kinds) {
    test(`a ${name} is reported down at the first attempt, naming what is there`, async () => {
      const sock = path.join(tmp, `${name.replace(" ", "-")}.sock`);
      make(sock);
      const client = new MemorydClient({ socketPath: sock, reconnect: false });
      const states: Array<string | undefined> = [];
      client.onStateChange((_state, detail) => states.push(detail));
      // Count the connection attempts: a retry (as for a daemon restarting) makes more than one.
      const real = net.createConnection;
      let attempts = 0;
      (net as { createConnection: typeof net.createConnection }).createConnection = ((...args: Parameters<typeof net.createConnection>) => {
        attempts++;
        return real(...args);
      }) as typeof net.createConnection;
      const expected = `memoryd is not running on ${sock}: it is ${said}, not a socket; is --socket or MEMORYD_SOCKET mistyped? (\`memctl start\` does not replace it)`;
      try {
        await assert.rejects(client.call("status"), (e: unknown) => {
          assert.ok(e instanceof DaemonUnavailable);
          assert.equal(e.message, expected);
          return true;
        });
      } finally {
        (net as { createConnection: typeof net.createConnection }).createConnection = real;
        client.close();
      }
      assert.equal(attempts, 1, "connected once, not retried");
      assert.deepEqual(states, [expected], "the down notice says it too");
    });
  }

  test("a socket, and nothing at all, are not called anything else", () => {
    const sock = path.join(tmp, "bound.sock");
    execFileSync(PYTHON, ["-c", "import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])", sock]);
    assert.equal(notASocket(sock), undefined);
    assert.equal(notASocket(path.join(tmp, "missing.sock")), undefined);
  });
});
