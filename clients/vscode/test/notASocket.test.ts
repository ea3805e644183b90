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

import { DaemonUnavailable, MemorydClient, notASocket, socketPathTooLong } from "../src/core/rpcClient";
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

  test("a path too long for a socket is reported down at the first attempt, and no socket at a shorter path is reached", async () => {
    // The connect said ENOENT, "not running", with an offer to start a daemon that cannot listen
    // there either; a libuv before 1.46 cut the path to fit and connected to what listens there.
    const folder = path.join(tmp, "l".repeat(130));
    fs.mkdirSync(folder);
    const sock = path.join(folder, "memoryd.sock");
    let reached = 0;
    const cut = net.createServer((s) => {
      reached++;
      s.destroy();
    });
    await new Promise<void>((resolve) => cut.listen(sock.slice(0, 107), resolve));
    const client = new MemorydClient({ socketPath: sock, reconnect: false });
    const expected = `memoryd is not running on ${sock}: its path is ${Buffer.byteLength(sock)} bytes, over the 107 a Unix socket's path may have; set --socket or MEMORYD_SOCKET (or XDG_RUNTIME_DIR) to a shorter one`;
    try {
      await assert.rejects(client.call("status"), (e: unknown) => {
        assert.ok(e instanceof DaemonUnavailable);
        assert.equal(e.message, process.platform === "darwin" ? expected.replace("107", "103") : expected);
        return true;
      });
    } finally {
      client.close();
      await new Promise((resolve) => cut.close(resolve));
    }
    assert.equal(reached, 0, "connections at the shorter path");
    assert.equal(socketPathTooLong("/".repeat(107), "linux"), undefined);
    assert.match(socketPathTooLong("/".repeat(104), "darwin") ?? "", /^its path is 104 bytes, over the 103 /);
    assert.match(socketPathTooLong("é".repeat(600), "linux") ?? "", /^its path is 1,200 bytes, /);
  });

  test("a socket, and nothing at all, are not called anything else", () => {
    const sock = path.join(tmp, "bound.sock");
    execFileSync(PYTHON, ["-c", "import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])", sock]);
    assert.equal(notASocket(sock), undefined);
    assert.equal(notASocket(path.join(tmp, "missing.sock")), undefined);
  });
});
