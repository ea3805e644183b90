// The socket client against the real daemon (concurrency, errors, a daemon killed mid-session
// and restarted, memctl start) and against fake servers that misbehave (silent, not JSON, a line
// over the cap, a notification storm).
import * as assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as net from "node:net";
import * as path from "node:path";
import { after, before, describe, test } from "node:test";

import { DownNotice, startDaemon } from "../src/core/daemon";
import { NotificationPresenter, type Message } from "../src/core/notifications";
import { DaemonUnavailable, MAX_TIMEOUTS, MemorydClient, ProtocolError, RpcError, RpcTimeout, type Notification } from "../src/core/rpcClient";
import { CALL_TIMEOUT_MS, PATIENCE_MS, Daemon, MEMCTL, PYTHON, REPO_ROOT, canConnect, cleanup, fakeServer, isolatedEnv, makeRepo, resultReply, stoppingReply, tempDir, waitFor } from "./helpers";

describe("against the real daemon", () => {
  const tmp = tempDir();
  const env = isolatedEnv(tmp);
  const socketPath = path.join(tmp, "d.sock");
  const repoA = makeRepo(path.join(tmp, "a"));
  const repoB = makeRepo(path.join(tmp, "b"));
  let daemon: Daemon;

  before(async () => {
    daemon = await Daemon.start(socketPath, env);
  });
  after(async () => {
    await daemon.stop();
    cleanup(tmp);
  });

  test("concurrent requests on one connection are matched by id", async () => {
    const client = new MemorydClient({ socketPath, timeoutMs: CALL_TIMEOUT_MS });
    try {
      const calls = Array.from({ length: 40 }, (_, i) => {
        const repo = i % 2 ? repoA : repoB;
        return client
          .call<{ files: Array<{ path: string }> }>("get_context", { cwd: repo.root, touched_paths: [] })
          .then((ctx) => ({ repo, ctx }));
      });
      const statuses = Array.from({ length: 10 }, () => client.call<{ pid: number }>("status"));
      for (const { repo, ctx } of await Promise.all(calls)) {
        assert.equal(ctx.files[0]?.path, repo.claudeMd);
      }
      for (const status of await Promise.all(statuses)) {
        assert.equal(status.pid, daemon.proc.pid);
      }
      // waited for: the daemon may not yet have seen the start-up probe's connection close
      await waitFor(async () => (await client.call<{ connections: number }>("status")).connections === 1, PATIENCE_MS, "one connection for all of them");
    } finally {
      client.close();
    }
  });

  test("daemon errors come back as RpcError with the daemon's code and message", async () => {
    const client = new MemorydClient({ socketPath, timeoutMs: CALL_TIMEOUT_MS });
    try {
      await assert.rejects(client.call("get_context", { cwd: "relative/dir" }), (e: unknown) => {
        assert.ok(e instanceof RpcError);
        assert.equal(e.code, -32602);
        assert.match(e.message, /cwd/);
        return true;
      });
      await assert.rejects(client.call("memory.lst", {}), (e: unknown) => e instanceof RpcError && e.code === -32601);
      assert.ok(client.isUp, "an error reply keeps the connection");
    } finally {
      client.close();
    }
  });

  test("a request over the daemon's line cap is refused before sending; the connection stays", async () => {
    const client = new MemorydClient({ socketPath, timeoutMs: CALL_TIMEOUT_MS });
    try {
      await client.call("status");
      const body = "x".repeat(65 * 1024 * 1024); // over the daemon's 64 MiB default
      await assert.rejects(
        client.call("memory.write", { cwd: repoA.root, type: "user", name: "big", description: "big", body }),
        (e: unknown) => e instanceof ProtocolError && /over the cap of 67108864 bytes; nothing was sent/.test(e.message),
      );
      assert.ok(client.isUp);
      await assert.rejects(
        client.call("memory.write", { cwd: repoA.root, type: "user", name: "big", description: "big", body: "y".repeat(300_000) }),
        (e: unknown) => e instanceof RpcError && e.code === -32004,
        "a body over the daemon's memory file cap is the daemon's clear error",
      );
      assert.ok((await client.call<{ pid: number }>("status")).pid > 0);
    } finally {
      client.close();
    }
  });

  test("notifications arrive after subscribe", async () => {
    const client = new MemorydClient({ socketPath, timeoutMs: CALL_TIMEOUT_MS });
    const seen: Notification[] = [];
    client.onNotification((n) => seen.push(n));
    try {
      await client.subscribe(["memory/saved"]);
      const written = await client.call<{ path: string }>("memory.write", {
        cwd: repoA.root,
        type: "project",
        name: "Release train",
        description: "releases leave on Tuesdays",
        body: "Releases leave on Tuesdays.",
      });
      await waitFor(() => seen.some((n) => n.params.path === written.path), PATIENCE_MS, "memory/saved");
      assert.equal(seen[0]?.method, "memory/saved");
      // An empty list is none: it unsubscribes (it was taken for every event).
      assert.deepEqual(await client.subscribe([]), []);
      const before = seen.length;
      const quiet = await client.call<{ path: string }>("memory.write", {
        cwd: repoA.root,
        type: "project",
        name: "Quiet train",
        description: "written after unsubscribing",
        body: "Nobody hears this one.",
      });
      await client.call("status"); // the notification, if sent, came before this reply
      assert.equal(seen.length, before, `notified after unsubscribing: ${quiet.path}`);
    } finally {
      client.close();
    }
  });
});

describe("a daemon killed mid-session", () => {
  const tmp = tempDir();
  const env = isolatedEnv(tmp);
  const socketPath = path.join(tmp, "k.sock");
  const repo = makeRepo(path.join(tmp, "r"));
  after(() => cleanup(tmp));

  test("calls fail with one clear message, then the client reconnects and resubscribes", async () => {
    let daemon = await Daemon.start(socketPath, env);
    const client = new MemorydClient({ socketPath, timeoutMs: CALL_TIMEOUT_MS, reconnect: { initialMs: 50, maxMs: 400 } });
    const notices: string[] = [];
    const notice = new DownNotice(client, (reason) => notices.push(reason));
    const states: string[] = [];
    client.onStateChange((state) => states.push(state));
    const seen: Notification[] = [];
    client.onNotification((n) => seen.push(n));
    try {
      await client.subscribe(["memory/saved"]);
      await daemon.kill();
      await waitFor(() => !client.isUp, PATIENCE_MS, "the client to see the daemon go");
      for (let i = 0; i < 5; i++) {
        await assert.rejects(client.call("status"), (e: unknown) => {
          assert.ok(e instanceof DaemonUnavailable, String(e));
          assert.match(e.message, /memoryd is not running on .*k\.sock.*memctl start|connection to memoryd lost/);
          return true;
        });
      }
      assert.equal(notices.length, 1, `one message for the outage, got ${JSON.stringify(notices)}`);

      fs.rmSync(socketPath, { force: true });
      daemon = await Daemon.start(socketPath, env);
      await waitFor(() => client.isUp, PATIENCE_MS, "the client to reconnect by itself");
      const status = await client.call<{ pid: number }>("status");
      assert.equal(status.pid, daemon.proc.pid);
      // The subscription came back with the connection.
      const written = await client.call<{ path: string }>("memory.write", {
        cwd: repo.root,
        type: "user",
        name: "Prefers short answers",
        description: "the user likes terse replies",
        body: "Keep replies short.",
      });
      await waitFor(() => seen.some((n) => n.params.path === written.path), PATIENCE_MS, "memory/saved after the reconnect");
      assert.deepEqual(states.slice(0, 3), ["up", "down", "up"]);
    } finally {
      notice.close();
      client.close();
      await daemon.stop();
    }
  });

  test("daemon down at first: clear message naming the socket, and memctl start brings it up", async () => {
    const sock = path.join(tmp, "s", "m.sock");
    // A call timeout far longer than the test: an answer that waited for it would be an
    // RpcTimeout, so DaemonUnavailable is "failed fast" without timing it on a loaded machine.
    const client = new MemorydClient({ socketPath: sock, timeoutMs: CALL_TIMEOUT_MS, reconnect: { initialMs: 50, maxMs: 200 } });
    try {
      await assert.rejects(client.call("status"), (e: unknown) => {
        assert.ok(e instanceof DaemonUnavailable, String(e));
        assert.ok(e.message.includes(sock), e.message);
        assert.match(e.message, /memctl start/);
        return true;
      });
      const result = await startDaemon(MEMCTL, sock, { ...env, MEMORYD_SOCKET: sock });
      assert.ok(result.ok, result.output);
      await waitFor(() => client.isUp, PATIENCE_MS, "reconnect after memctl start");
    } finally {
      client.close();
      // in `finally`: the daemon memctl started is no child of this process, and was left
      // running when an assertion above failed
      spawnSync(MEMCTL, ["--socket", sock, "stop"], { env: { ...env, MEMORYD_SOCKET: sock }, timeout: 60_000 });
    }
  });

  test("a memctl whose path has spaces is run as that one program", async () => {
    const folder = path.join(tmp, "My Tools", "bin");
    fs.mkdirSync(folder, { recursive: true });
    const memctl = path.join(folder, "memctl");
    const said = path.join(tmp, "memctl-args.txt");
    fs.writeFileSync(memctl, `#!/bin/sh\nprintf '%s\\n' "$@" > '${said}'\necho started\n`, { mode: 0o755 });
    const result = await startDaemon(memctl, path.join(tmp, "spaced.sock"));
    assert.ok(result.ok, result.output);
    assert.equal(result.output, "started");
    assert.deepEqual(fs.readFileSync(said, "utf8").split("\n"), ["--socket", path.join(tmp, "spaced.sock"), "start", ""]);
  });

  test("a memctl path under ~ is run from the home folder", async () => {
    // execFile takes ~ literally: "~/My Tools/memctl" was split, "~/bin/memctl" not found.
    const home = path.join(tmp, "home");
    const folder = path.join(home, "My Tools");
    fs.mkdirSync(folder, { recursive: true });
    fs.writeFileSync(path.join(folder, "memctl"), "#!/bin/sh\necho started \"$@\"\n", { mode: 0o755 });
    const sock = path.join(tmp, "home.sock");
    for (const memctl of ["~/My Tools/memctl", "  ~/My Tools/memctl "]) {
      const result = await startDaemon(memctl, sock, { ...process.env, HOME: home });
      assert.ok(result.ok, result.output);
      assert.equal(result.output, `started --socket ${sock} start`);
    }
  });

  test("a memctl that is not installed is a clear message", async () => {
    const result = await startDaemon("/nonexistent/memctl", path.join(tmp, "x.sock"));
    assert.equal(result.ok, false);
    assert.match(result.output, /not found/);
  });

  test("a connect the dying daemon's socket takes but never answers is not the daemon back: one message for the outage", async () => {
    // Found under load (1 run in ~30): a daemon killed by SIGKILL closed the client's connection
    // and its listening socket only a moment later; a connect in between went into the backlog
    // nobody accepts, was counted as up and was reset: a second outage message for one outage.
    // The stand-in keeps listening and closes each connection unanswered, as that backlog does.
    const sock = path.join(tmp, "dying.sock");
    let dying = false;
    let reset = 0; // connections made while dying
    const server = await fakeServer(sock, (line, s) => {
      const request = JSON.parse(line) as { id: number; method: string };
      if (dying) {
        s.destroy();
      } else if (request.method === "subscribe") {
        s.write(resultReply(request.id, { subscribed: ["memory/saved"] }));
      } else {
        s.write(resultReply(request.id, { pid: 7 }));
      }
    });
    server.server.on("connection", () => (reset += dying ? 1 : 0));
    const client = new MemorydClient({ socketPath: sock, timeoutMs: CALL_TIMEOUT_MS, reconnect: { initialMs: 50, maxMs: 400 } });
    const notices: string[] = [];
    const notice = new DownNotice(client, (reason) => notices.push(reason));
    const states: string[] = [];
    client.onStateChange((state) => states.push(state));
    try {
      await client.subscribe(["memory/saved"]);
      dying = true;
      for (const s of server.connections) {
        s.destroy();
      }
      await waitFor(() => !client.isUp, PATIENCE_MS, "the client to see the daemon go");
      for (let i = 0; i < 3; i++) {
        // each on a connection of its own: the one before was reset before this call failed
        await assert.rejects(client.call("status"), (e: unknown) => e instanceof DaemonUnavailable);
      }
      assert.ok(reset >= 3, `connections reset unanswered: ${reset}`);
      assert.deepEqual(notices.length, 1, `one message for the outage, got ${JSON.stringify(notices)}`);
      dying = false;
      await waitFor(() => client.isUp, PATIENCE_MS, "the client to reconnect to a daemon that answers");
      assert.deepEqual(await client.call("status"), { pid: 7 });
      assert.deepEqual(states, ["up", "down", "up"]);
      assert.equal(notices.length, 1);
    } finally {
      notice.close();
      client.close();
      await server.close();
    }
  });
});

/** Block this process's event loop for `ms`, as a busy extension host or a laptop asleep does. */
function holdEventLoop(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

/**
 * Real memoryd daemons as a service manager runs them (tests/daemon/test_socket_races.py): one
 * listener holds the socket; the first daemon on it has begun to stop (each client handed over
 * now is a late one, answered -32006 per request), stops listening once it has one ("closed"),
 * and the next daemon serves the socket once the first has stopped ("second"). Ends when its
 * standard input closes.
 */
const STOPPING_DAEMONS = `
import asyncio, socket, sys
from pathlib import Path
from memoryd.core.model_config import ModelConfig
from memoryd.core.team_config import TeamConfig
from memoryd.daemon import server as server_module
from memoryd.daemon.app import Daemon
from memoryd.daemon.config import DaemonConfig
from memoryd.daemon.server import Server

server_module.LATE_CLIENT_WINDOW_S = 600.0  # a loaded machine's slow client is still read

async def serve(config, listener):
    server = Server(Daemon(config), listener.dup())
    await server.start()
    await server.daemon.on_start()
    return server

async def main(path):
    config = DaemonConfig(socket_path=Path(path), model=ModelConfig(), team=TeamConfig(), drain_timeout_s=600.0)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(16)
    first = await serve(config, listener)
    loop = asyncio.get_running_loop()
    first.stop_deadline = loop.time() + config.drain_timeout_s  # the stop has begun
    print("listening", flush=True)
    while not first._late:
        await asyncio.sleep(0.01)
    stopping = asyncio.create_task(first.stop())
    while first._server is not None and first._server.is_serving():
        await asyncio.sleep(0.01)
    print("closed", flush=True)
    await stopping  # waits for the late client to close its connection
    second = await serve(config, listener)
    print("second", flush=True)
    await loop.run_in_executor(None, sys.stdin.read)
    await second.stop()
    listener.close()

asyncio.run(main(sys.argv[1]))
`;

describe("a daemon that is stopping (-32006)", () => {
  const tmp = tempDir();
  after(() => cleanup(tmp));

  test("a stand-in answering -32006 on the first connection: each call is sent again on a new one, the subscription too; that one is closed", async () => {
    // Found by a bug hunt: since session 23 a client connecting as the daemon stops gets -32006
    // on each request for 5 s, where it was closed; the client failed the calls with it and
    // the extension warned "could not subscribe to notifications: memoryd is stopping".
    const sock = path.join(tmp, "stand-in.sock");
    const sent: string[][] = [];
    const accepted: net.Socket[] = []; // in order (the server's set forgets closed ones)
    let firstClosed = false;
    const server = await fakeServer(sock, (line, s) => {
      const request = JSON.parse(line) as { id: number; method: string };
      const index = accepted.indexOf(s);
      (sent[index] ??= []).push(request.method);
      if (index === 0) {
        s.write(stoppingReply(request.id));
      } else if (request.method === "subscribe") {
        s.write(resultReply(request.id, { subscribed: ["memory/saved"] }));
        s.write(JSON.stringify({ jsonrpc: "2.0", method: "memory/saved", params: { path: "/m/x.md" } }) + "\n");
      } else {
        s.write(resultReply(request.id, { pid: 7 }));
      }
    });
    server.server.on("connection", (s: net.Socket) => accepted.push(s));
    const client = new MemorydClient({ socketPath: sock, timeoutMs: CALL_TIMEOUT_MS, reconnect: { initialMs: 50, maxMs: 400 } });
    const states: string[] = [];
    client.onStateChange((state) => states.push(state));
    const seen: Notification[] = [];
    client.onNotification((n) => seen.push(n));
    try {
      await client.connect();
      await waitFor(() => accepted.length === 1, PATIENCE_MS, "the connection accepted");
      accepted[0]!.once("close", () => (firstClosed = true));
      const [subscribed, status] = await Promise.all([client.subscribe(["memory/saved"]), client.call<{ pid: number }>("status")]);
      assert.deepEqual(subscribed, ["memory/saved"]);
      assert.deepEqual(status, { pid: 7 });
      await waitFor(() => seen.length === 1, PATIENCE_MS, "a notification on the new connection");
      await waitFor(() => firstClosed, PATIENCE_MS, "the stopping daemon's connection closed by the client");
      assert.deepEqual(sent[0]?.sort(), ["status", "subscribe"]);
      assert.deepEqual(sent[1]?.sort(), ["status", "subscribe"], "each sent once more, the subscription once");
      assert.deepEqual(states, ["up"], "no outage said");
    } finally {
      client.close();
      await server.close();
    }
  });

  test("a -32006 on the new connection too is the call's error: it was sent again once only", async () => {
    const sock = path.join(tmp, "always-stopping.sock");
    let statuses = 0;
    const server = await fakeServer(sock, (line, s) => {
      const request = JSON.parse(line) as { id: number; method: string };
      statuses += request.method === "status" ? 1 : 0;
      s.write(stoppingReply(request.id));
    });
    const client = new MemorydClient({ socketPath: sock, timeoutMs: CALL_TIMEOUT_MS, reconnect: false });
    try {
      await assert.rejects(client.call("status"), (e: unknown) => e instanceof RpcError && e.code === -32006 && /memoryd is stopping/.test(e.message));
      assert.equal(statuses, 2);
    } finally {
      client.close();
      await server.close();
    }
  });

  test("the real daemon whose stop has begun: the calls and the subscription reach the next daemon on the socket", async () => {
    const sock = path.join(tmp, "real.sock");
    const env = isolatedEnv(path.join(tmp, "real"));
    const repo = makeRepo(path.join(tmp, "real-repo"));
    const proc = spawn(PYTHON, ["-c", STOPPING_DAEMONS, sock], { env, cwd: REPO_ROOT, stdio: ["pipe", "pipe", "pipe"] });
    let said = "";
    let log = "";
    proc.stdout.on("data", (chunk: Buffer) => (said += chunk.toString()));
    proc.stderr.on("data", (chunk: Buffer) => (log += chunk.toString()));
    const exited = new Promise((resolve) => proc.once("exit", resolve));
    const saidLine = (line: string) =>
      waitFor(() => {
        if (proc.exitCode !== null) {
          throw new Error(`the daemons exited with ${proc.exitCode}: ${log}`);
        }
        return said.split("\n").includes(line);
      }, PATIENCE_MS, `the daemons to say ${line}`);
    const client = new MemorydClient({ socketPath: sock, timeoutMs: CALL_TIMEOUT_MS, reconnect: { initialMs: 50, maxMs: 400 } });
    const states: string[] = [];
    client.onStateChange((state) => states.push(state));
    const seen: Notification[] = [];
    client.onNotification((n) => seen.push(n));
    try {
      await saidLine("listening");
      await client.connect(); // handed over once the stop began
      await saidLine("closed"); // the first daemon no longer listens: a new connection waits for the next
      const [subscribed, status] = await Promise.all([client.subscribe(["memory/saved"]), client.call<{ pid: number }>("status")]);
      assert.deepEqual(subscribed, ["memory/saved"]);
      assert.equal(status.pid, proc.pid);
      assert.ok(said.split("\n").includes("second"), "answered by the next daemon");
      const written = await client.call<{ path: string }>("memory.write", { cwd: repo.root, type: "user", name: "Terse", description: "short replies", body: "Keep replies short." });
      await waitFor(() => seen.some((n) => n.params.path === written.path), PATIENCE_MS, "memory/saved on the new connection");
      assert.deepEqual(states, ["up"], "no outage said");
    } finally {
      client.close();
      proc.stdin.end();
      const timer = setTimeout(() => proc.kill("SIGKILL"), 30_000);
      await exited;
      clearTimeout(timer);
    }
  });
});

/**
 * A stand-in daemon in a process of its own, so that it writes while this one is held up: it
 * answers `long` with params.bytes of text in one line (far more than a socket holds), writing
 * the first 64 KiB, then making the file params.mark, then the rest as the client reads; any
 * other method gets `{ pid: 7 }`.
 */
const LONG_REPLY_SERVER = `
const fs = require("node:fs");
const net = require("node:net");
const server = net.createServer((sock) => {
  let buffered = "";
  sock.on("error", () => undefined);
  sock.on("data", (chunk) => {
    buffered += chunk.toString("utf8");
    for (let i = buffered.indexOf("\\n"); i !== -1; i = buffered.indexOf("\\n")) {
      const request = JSON.parse(buffered.slice(0, i));
      buffered = buffered.slice(i + 1);
      if (request.method !== "long") {
        sock.write(JSON.stringify({ jsonrpc: "2.0", id: request.id, result: { pid: 7 } }) + "\\n");
        continue;
      }
      const text = "x".repeat(request.params.bytes);
      const line = Buffer.from(JSON.stringify({ jsonrpc: "2.0", id: request.id, result: { text } }) + "\\n");
      sock.write(line.subarray(0, 64 * 1024), () => {
        fs.writeFileSync(request.params.mark, "");
        sock.write(line.subarray(64 * 1024));
      });
    }
  });
});
server.listen(process.argv[1]);
`;

describe("an event loop held up", () => {
  const tmp = tempDir();
  after(() => cleanup(tmp));

  test("a connect made while the event loop was held up past the connect timeout is no outage", async () => {
    // The socket connects in the kernel meanwhile; the timers ran first after the hold-up:
    // "did not accept a connection within 100 ms", the daemon down, the outage warning shown.
    const sock = path.join(tmp, "held.sock");
    const server = await fakeServer(sock, (line, s) => {
      const request = JSON.parse(line) as { id: number };
      s.write(resultReply(request.id, { pid: 7 }));
    });
    const client = new MemorydClient({ socketPath: sock, connectTimeoutMs: 100, timeoutMs: CALL_TIMEOUT_MS, reconnect: false });
    const states: string[] = [];
    client.onStateChange((state) => states.push(state));
    try {
      const answered = client.call("status"); // the connect starts now
      holdEventLoop(500);
      assert.deepEqual(await answered, { pid: 7 });
      assert.deepEqual(states, ["up"]);
    } finally {
      client.close();
      await server.close();
    }
  });

  test("a reply that came while the event loop was held up past the call's timeout is the answer", async () => {
    // The timers ran first after the hold-up and failed the call with the answer already in.
    // The stand-in daemon (in this process) writes the reply, then holds the loop past the
    // call's deadline: no clock decides whether the daemon answered in time (the real daemon
    // given 1.5 s to answer was a race on a loaded machine).
    const sock = path.join(tmp, "held-reply.sock");
    const timeoutMs = 200;
    let timed = false; // the call under test is in flight
    let deadlinePassed = false; // a twin of the call's timer: set when the call's has run
    let held = false;
    const server = await fakeServer(sock, (line, s) => {
      const request = JSON.parse(line) as { id: number };
      s.write(resultReply(request.id, { pid: 7 }));
      if (timed && !deadlinePassed) {
        held = true;
        holdEventLoop(3 * timeoutMs); // the reply waits in the client's socket meanwhile
      }
    });
    const client = new MemorydClient({ socketPath: sock, timeoutMs: CALL_TIMEOUT_MS, reconnect: false });
    try {
      await client.call("status"); // connected
      // Tried again only when this machine stalled past the deadline before the request was
      // read (the twin ran first): that try shows nothing.
      for (let attempt = 1; !held; attempt++) {
        assert.ok(attempt <= 5, "the request was read before its deadline in one of 5 tries");
        timed = true;
        deadlinePassed = false;
        const answered = client.call("status", undefined, { timeoutMs }).catch((error: unknown) => error);
        const twin = setTimeout(() => (deadlinePassed = true), timeoutMs);
        const result = await answered;
        clearTimeout(twin);
        timed = false;
        if (held) {
          assert.deepEqual(result, { pid: 7 });
        }
      }
    } finally {
      client.close();
      await server.close();
    }
  });

  test("a reply longer than the socket holds, coming in while the event loop was held up past the call's timeout, is the answer", async () => {
    // The socket holds about 200 KB: after the hold-up one read takes that much of a 1 MB reply
    // and the rest is still on its way. The deadline was decided there, with a line begun in
    // the buffer: "did not answer". The timeout is long enough that a loaded machine finishing
    // the reply after the hold-up stays within it.
    const sock = path.join(tmp, "held-long.sock");
    const mark = path.join(tmp, "held-long.mark");
    const timeoutMs = 2_000;
    const bytes = 1_000_000;
    const standIn = spawn(process.execPath, ["-e", LONG_REPLY_SERVER, sock], { stdio: "ignore" });
    const client = new MemorydClient({ socketPath: sock, timeoutMs: CALL_TIMEOUT_MS, reconnect: false });
    try {
      await waitFor(() => canConnect(sock), PATIENCE_MS, "the stand-in to listen");
      await client.call("status"); // connected
      const calledAt = Date.now();
      const answered = client.call<{ text: string }>("long", { bytes, mark }, { timeoutMs });
      await new Promise((r) => setImmediate(r)); // the request is written
      // Held up until the reply is coming in and the deadline passed.
      while (!fs.existsSync(mark) || Date.now() - calledAt < timeoutMs + 200) {
        assert.ok(Date.now() - calledAt < 60_000, "the stand-in never answered");
        holdEventLoop(5);
      }
      assert.equal((await answered).text.length, bytes);
    } finally {
      client.close();
      standIn.kill();
    }
  });
});

describe("misbehaving daemons", () => {
  const tmp = tempDir();
  after(() => cleanup(tmp));

  test("a daemon that never answers: every call times out, nothing blocks", async () => {
    const sock = path.join(tmp, "silent.sock");
    const server = await fakeServer(sock, () => undefined);
    // 1 s each: one after another, the 20 would take 20 s; the bound below is far from both
    // (it was 2 s for 20 of 300 ms, and a loaded machine came near it)
    const client = new MemorydClient({ socketPath: sock, timeoutMs: 1_000 });
    let ticks = 0; // while the calls wait (a count over the whole wait failed when held up)
    const ticker = setInterval(() => client.inFlight > 0 && ticks++, 20);
    try {
      const started = Date.now();
      const results = await Promise.allSettled(Array.from({ length: 20 }, () => client.call("status")));
      const elapsed = Date.now() - started;
      for (const r of results) {
        assert.equal(r.status, "rejected");
        assert.ok(r.reason instanceof RpcTimeout);
        assert.match((r.reason as Error).message, /did not answer status within 1000 ms/);
      }
      assert.ok(elapsed < 10_000, `all 20 time out together (${elapsed} ms)`);
      assert.ok(ticks >= 1, `the event loop kept running while they waited (${ticks} ticks)`);
      assert.equal(client.inFlight, 0, "nothing left pending");
      // A per-call timeout overrides the default: its message names it (a clock bound of
      // 250 ms failed on a loaded machine).
      await assert.rejects(client.call("status", undefined, { timeoutMs: 50 }), (e: unknown) => e instanceof RpcTimeout && /within 50 ms/.test(e.message));
    } finally {
      clearInterval(ticker);
      client.close();
      await server.close();
    }
  });

  test("a reply that trickles in and never ends fails after ten timeouts; so does a call waiting beside it", async () => {
    // A due timeout waits while a reply is coming in. A daemon sending a byte now and then kept
    // the call waiting for ever (a line only ends at the 16 MiB cap), and so did a call never
    // answered while another call's reply came in on the connection. Both end at MAX_TIMEOUTS
    // timeouts (2 s here); only the kind of error is looked at, as a loaded machine may stall
    // the trickle long enough for a plain timeout.
    const sock = path.join(tmp, "trickle.sock");
    const trickles: NodeJS.Timeout[] = [];
    const server = await fakeServer(sock, (line, s) => {
      const request = JSON.parse(line) as { id: number; method: string };
      if (request.method === "status") {
        s.write(resultReply(request.id, { pid: 7 }));
      } else if (request.method === "trickle") {
        s.write(`{"jsonrpc": "2.0", "id": ${request.id}, "result": "`);
        trickles.push(setInterval(() => s.destroyed || s.write("x"), 20));
      } // anything else is never answered
    });
    const client = new MemorydClient({ socketPath: sock, timeoutMs: CALL_TIMEOUT_MS, reconnect: false });
    try {
      assert.equal(MAX_TIMEOUTS, 10, "the cap, as the Neovim client has it");
      await client.call("status"); // connected
      const beside = client.call("get_context", {}, { timeoutMs: 200 });
      const trickled = client.call("trickle", {}, { timeoutMs: 200 });
      const [b, t] = await Promise.allSettled([beside, trickled]);
      assert.equal(t.status, "rejected");
      assert.ok(t.reason instanceof RpcTimeout, `the trickled call: ${String(t.reason)}`);
      assert.equal(b.status, "rejected");
      assert.ok(b.reason instanceof RpcTimeout, `the call beside it: ${String(b.reason)}`);
    } finally {
      trickles.forEach(clearInterval);
      client.close();
      await server.close();
    }
  });

  test("a reply that is not JSON: clear error, then the next connection works", async () => {
    const sock = path.join(tmp, "garbage.sock");
    let first = true;
    const server = await fakeServer(sock, (line, s) => {
      const request = JSON.parse(line) as { id: number };
      if (first) {
        first = false;
        s.write("<html>502 Bad Gateway</html>\n");
      } else {
        s.write(resultReply(request.id, { ok: true }));
      }
    });
    const client = new MemorydClient({ socketPath: sock, timeoutMs: CALL_TIMEOUT_MS, reconnect: { initialMs: 20, maxMs: 100 } });
    try {
      await assert.rejects(client.call("status"), (e: unknown) => {
        assert.ok(e instanceof ProtocolError);
        assert.match(e.message, /not JSON: "<html>502 Bad Gateway<\/html>"/);
        return true;
      });
      assert.deepEqual(await client.call("status"), { ok: true });
    } finally {
      client.close();
      await server.close();
    }
  });

  test("a reply line over the cap resets the connection with a clear error", async () => {
    const sock = path.join(tmp, "big.sock");
    const server = await fakeServer(sock, (_line, s) => {
      s.write('{"jsonrpc":"2.0","id":1,"result":"' + "x".repeat(300_000)); // no newline yet
    });
    // fails as soon as the cap is passed, not at the timeout, which would be an RpcTimeout
    const client = new MemorydClient({ socketPath: sock, lineCapBytes: 64 * 1024, timeoutMs: CALL_TIMEOUT_MS });
    try {
      await assert.rejects(client.call("status"), (e: unknown) => {
        assert.ok(e instanceof ProtocolError, String(e));
        assert.match(e.message, /over the client's cap of 65536 bytes/);
        return true;
      });
    } finally {
      client.close();
      await server.close();
    }
  });

  test("a storm of 1,000 notifications in a second: all delivered, a handful shown, calls still answered", async () => {
    const sock = path.join(tmp, "storm.sock");
    const server = await fakeServer(sock, (line, s) => {
      const request = JSON.parse(line) as { id: number; method: string };
      if (request.method === "subscribe") {
        s.write(resultReply(request.id, { subscribed: ["memory/saved"] }));
        let sent = 0;
        const burst = setInterval(() => {
          for (let i = 0; i < 100 && sent < 1000; i++, sent++) {
            s.write(JSON.stringify({ jsonrpc: "2.0", method: "memory/saved", params: { path: `/m/project_${sent}.md`, project: "/p" } }) + "\n");
          }
          if (sent >= 1000) {
            clearInterval(burst);
          }
        }, 10);
      } else {
        s.write(resultReply(request.id, { pong: request.id }));
      }
    });
    const client = new MemorydClient({ socketPath: sock, timeoutMs: CALL_TIMEOUT_MS });
    const shown: Message[] = [];
    const presenter = new NotificationPresenter((m) => shown.push(m), { perWindow: 3, windowMs: 60_000 });
    let received = 0;
    client.onNotification((n) => {
      received++;
      presenter.handle(n);
    });
    try {
      await client.subscribe();
      const replies = await Promise.all(Array.from({ length: 10 }, () => client.call<{ pong: number }>("ping")));
      assert.equal(replies.length, 10);
      // (how fast is for bench/: a clock bound here failed on a loaded machine)
      await waitFor(() => received === 1000, PATIENCE_MS, "all 1,000 notifications");
      assert.equal(shown.length, 3, "three shown; the rest held back");
      assert.equal(presenter.heldBack, 997);
      presenter.flush();
      assert.equal(shown.length, 4);
      assert.match(shown[3]!.text, /997 more notifications not shown/);
    } finally {
      presenter.dispose();
      client.close();
      await server.close();
    }
  });

  test("a stale socket (nobody listening): retried for a moment, then one clear error", async () => {
    const sock = path.join(tmp, "stale.sock");
    const bind = spawnSync(PYTHON, ["-c", "import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])", sock]);
    assert.equal(bind.status, 0, String(bind.stderr));
    // given up by itself: waiting for the call's timeout would be an RpcTimeout
    const client = new MemorydClient({ socketPath: sock, reconnect: false, timeoutMs: CALL_TIMEOUT_MS });
    try {
      const started = Date.now();
      await assert.rejects(client.call("status"), (e: unknown) => {
        assert.ok(e instanceof DaemonUnavailable, String(e));
        assert.match(e.message, /ECONNREFUSED.*memctl start/);
        return true;
      });
      const elapsed = Date.now() - started;
      // at least the second of retries; the upper bound only far from the timeout (3 s was
      // near enough to what a loaded machine took)
      assert.ok(elapsed >= 900 && elapsed < 30_000, `retried about a second (${elapsed} ms)`);
    } finally {
      client.close();
    }
  });

  test("a socket another user owns is refused before connecting, naming the owner and the path", {
    skip: process.getuid?.() !== 0 ? "chown to another user needs root" : false,
  }, async () => {
    const sock = path.join(tmp, "theirs.sock");
    const server = await fakeServer(sock, () => undefined);
    let accepted = 0;
    server.server.on("connection", () => accepted++);
    fs.chownSync(sock, 65534, 65534);
    const client = new MemorydClient({ socketPath: sock, timeoutMs: CALL_TIMEOUT_MS, reconnect: false });
    try {
      await assert.rejects(client.call("status"), (e: unknown) => {
        assert.ok(e instanceof DaemonUnavailable);
        assert.equal(e.message, `refusing to connect to ${sock}: it belongs to uid 65534, not to you (uid 0)`);
        return true;
      });
      assert.equal(accepted, 0, "nothing connected to it");
    } finally {
      client.close();
      await server.close();
    }
  });

  test("a socket in a folder others may write in is refused; a sticky one is not", async () => {
    const folder = path.join(tmp, "open");
    fs.mkdirSync(folder);
    fs.chmodSync(folder, 0o777);
    const sock = path.join(folder, "d.sock");
    const server = await fakeServer(sock, (line, s) => {
      const request = JSON.parse(line) as { id: number };
      s.write(resultReply(request.id, { pid: 7 }));
    });
    let accepted = 0;
    server.server.on("connection", () => accepted++);
    const client = new MemorydClient({ socketPath: sock, timeoutMs: CALL_TIMEOUT_MS, reconnect: false });
    try {
      await assert.rejects(client.call("status"), (e: unknown) => {
        assert.ok(e instanceof DaemonUnavailable);
        assert.match(e.message, /^refusing to connect to .*d\.sock: its folder .*open is writable by other users$/);
        return true;
      });
      assert.equal(accepted, 0, "nothing connected to it");
      fs.chmodSync(folder, 0o1777); // sticky, as /tmp: the socket's owner decides, and it is ours
      assert.deepEqual(await client.call("status"), { pid: 7 });
    } finally {
      client.close();
      await server.close();
    }
  });

  test("a daemon that closes the connection mid-call: DaemonUnavailable, not a hang", async () => {
    const sock = path.join(tmp, "hangup.sock");
    const server = await fakeServer(sock, (_line, s) => s.destroy());
    // not a hang: a call waiting for its timeout would reject with RpcTimeout, not this
    const client = new MemorydClient({ socketPath: sock, timeoutMs: CALL_TIMEOUT_MS, reconnect: false });
    try {
      await assert.rejects(client.call("status"), DaemonUnavailable);
    } finally {
      client.close();
      await server.close();
    }
  });
});
