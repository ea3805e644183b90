// One NDJSON JSON-RPC 2.0 connection to memoryd over its Unix socket: concurrent requests
// matched by id, a timeout on every call, a cap on reply lines, notifications after `subscribe`,
// and reconnection with backoff. No `vscode` import: tested with node's test runner.
import * as fs from "node:fs";
import * as net from "node:net";
import * as path from "node:path";

/** A JSON-RPC error the daemon answered with (its code and message kept). */
export class RpcError extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly data?: unknown,
  ) {
    super(message);
    this.name = "RpcError";
  }
}

/** Nobody answers on the socket, or the connection was lost. */
export class DaemonUnavailable extends Error {
  constructor(
    message: string,
    readonly socketPath: string,
  ) {
    super(message);
    this.name = "DaemonUnavailable";
  }
}

/**
 * Why the socket at `socketPath` is not the user's own daemon, or undefined. Another local user
 * who made the socket's folder first (the /tmp/memoryd-<uid> fallback, any sticky folder) and
 * listens there would otherwise get every request and answer in the daemon's place. Node cannot
 * ask the kernel who listens (SO_PEERCRED), so the socket file's owner stands for it, checked
 * before connecting: the socket and its folder must be the user's (or root's), and the folder
 * not writable by others unless sticky (the daemon's own rule for its folder). A path that is
 * not there is left to the connect, which reports the daemon down.
 */
export function untrustedSocket(socketPath: string): string | undefined {
  if (typeof process.getuid !== "function") {
    return undefined; // Windows: no Unix owners
  }
  const uid = process.getuid();
  const yours = (owner: number): boolean => owner === uid || owner === 0;
  const folder = path.dirname(socketPath);
  const dir = statOrUndefined(() => fs.statSync(folder));
  if (dir !== undefined) {
    if (!yours(dir.uid)) {
      return `its folder ${folder} belongs to uid ${dir.uid}, not to you (uid ${uid})`;
    }
    if ((dir.mode & 0o022) !== 0 && (dir.mode & 0o1000) === 0) {
      return `its folder ${folder} is writable by other users`;
    }
  }
  const file = statOrUndefined(() => fs.lstatSync(socketPath));
  if (file !== undefined && !yours(file.uid)) {
    return `it belongs to uid ${file.uid}, not to you (uid ${uid})`;
  }
  return undefined;
}

/**
 * Why no socket can be at `socketPath` when it is longer than a Unix socket's path may be
 * (sun_path less its closing NUL: 107 bytes on Linux, 103 on macOS), in memoryd_client's words
 * (`socket_path_too_long`); undefined when it is not. The connect said only ENOENT: "not
 * running", with an offer to start a daemon that cannot listen there either (and a libuv
 * before 1.46 cut such a path to fit, connecting to whatever listened at the shorter one).
 */
export function socketPathTooLong(socketPath: string, platform: NodeJS.Platform = process.platform): string | undefined {
  const size = Buffer.byteLength(socketPath);
  const limit = platform === "darwin" ? 103 : 107;
  if (size <= limit) {
    return undefined;
  }
  return `its path is ${size.toLocaleString("en-US")} bytes, over the ${limit} a Unix socket's path may have; set --socket or MEMORYD_SOCKET (or XDG_RUNTIME_DIR) to a shorter one`;
}

/**
 * What is at `socketPath` when it is there and no socket (a folder, a regular file, a FIFO), said
 * with what to do, in memoryd_client's words (`not_a_socket`); undefined for a socket or nothing.
 * Connecting to one fails as a daemon restarting does (ECONNREFUSED on Linux, ENOTSOCK on some
 * BSDs), which would be retried for a second and then said only as "not running".
 */
export function notASocket(socketPath: string): string | undefined {
  const found = statOrUndefined(() => fs.statSync(socketPath));
  if (found === undefined || found.isSocket()) {
    return undefined;
  }
  const kind = found.isDirectory()
    ? "a folder"
    : found.isFile()
      ? "a regular file"
      : found.isFIFO()
        ? "a FIFO"
        : "a special file";
  return `it is ${kind}, not a socket; is --socket or MEMORYD_SOCKET mistyped? (\`memctl start\` does not replace it)`;
}

function statOrUndefined(stat: () => fs.Stats): fs.Stats | undefined {
  try {
    return stat();
  } catch {
    return undefined;
  }
}

/** The daemon did not answer within the call's timeout. */
export class RpcTimeout extends Error {
  constructor(message: string) {
    super(message);
    this.name = "RpcTimeout";
  }
}

/** The daemon sent something that is not a JSON-RPC message, or a line over the cap. */
export class ProtocolError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ProtocolError";
  }
}

export interface Notification {
  method: string;
  params: Record<string, unknown>;
}

export type ConnectionState = "up" | "down";

export interface ClientOptions {
  socketPath: string;
  /** Default per-call timeout. */
  timeoutMs?: number;
  /** How long connecting may take before the daemon counts as down. */
  connectTimeoutMs?: number;
  /** Longest reply line accepted; a longer one drops the connection with a clear error. */
  lineCapBytes?: number;
  /** Longest request line sent (the daemon closes the connection on a line over its cap). */
  requestCapBytes?: number;
  /** Reconnect with doubling delays while the daemon is down; false: only on the next call. */
  reconnect?: { initialMs: number; maxMs: number } | false;
}

export const DEFAULT_TIMEOUT_MS = 5_000;
export const DEFAULT_CONNECT_TIMEOUT_MS = 2_000;
export const DEFAULT_LINE_CAP_BYTES = 16 * 1024 * 1024; // the daemon's reply cap
export const DEFAULT_REQUEST_CAP_BYTES = 64 * 1024 * 1024; // the daemon's request line cap (64 MiB default)
export const DEFAULT_RECONNECT = { initialMs: 500, maxMs: 30_000 };
/** The longest delay a Node timer keeps (2^31 - 1 ms, about 24.8 days): a longer one fires at once. */
export const MAX_TIMER_MS = 2 ** 31 - 1;
/**
 * A call whose reply is coming in is waited for past its timeout (see `call`), for at most this
 * many timeouts in all from the call: a daemon trickling a byte now and then, or another call's
 * long reply on the connection while this one is never answered, kept it waiting with no end.
 * The Neovim client has the same (Client.MAX_TIMEOUTS in rpc.lua).
 */
export const MAX_TIMEOUTS = 10;
/** How long connecting is retried while the daemon is busy or restarting. */
export const CONNECT_RETRY_MS = 1_000;
const BUSY_CODES = new Set(["EAGAIN", "EWOULDBLOCK", "ECONNREFUSED"]);
/**
 * The daemon's answer to a request it read but did not start because it is stopping (on a
 * connection handed over once its stop began, every request's): nothing was done.
 */
export const STOPPING = -32006;
/** The errors connecting to something that is not a listening socket gives. */
const NOT_LISTENING_CODES = new Set(["ECONNREFUSED", "ENOTSOCK"]);

interface Pending {
  method: string;
  line: string;
  /** The connection it went out on; undefined until written. */
  sock: net.Socket | undefined;
  /** Sent again after a STOPPING answer: not a second time. */
  resent: boolean;
  /** The bytes read on `sock` when it was written, then at each look its deadline took. */
  seen: number;
  /** When the call was made (performance.now()), for the cap on waiting past its timeout. */
  started: number;
  resolve: (value: unknown) => void;
  reject: (error: Error) => void;
  timer: NodeJS.Timeout;
}

type Listener<T extends unknown[]> = (...args: T) => void;

/** A reply line not yet whole, one per connection, and how many bytes came on it in all. */
interface LineBuffer {
  chunks: Buffer[];
  buffered: number;
  received: number;
}

/**
 * `setTimeout` for a deadline on I/O: `expire` runs only after the I/O that was ready when the
 * timer fired has been handled. After the event loop was held up (another extension busy, a
 * laptop waking) past the deadline, the timers ran before the connect or the reply that had come
 * in meanwhile, and failed it: the daemon shown down, a call "not answered" that was.
 * That is one read: a reply longer than the socket buffers (~200 KB on Linux) is still coming in
 * then, so a call's `expire` waits on while one keeps coming (see `call`). A `clearTimeout` after
 * the timer fired does not stop `expire`, so `expire` checks that its wait is still on.
 */
function ioDeadline(expire: () => void, ms: number): NodeJS.Timeout {
  // Over MAX_TIMER_MS (a setting of 1e10 meant as "as long as it takes") the timer fired after
  // 1 ms: every call "did not answer", every connect failed, the daemon shown down.
  return setTimeout(() => setImmediate(expire), Math.min(ms, MAX_TIMER_MS));
}

export class MemorydClient {
  readonly socketPath: string;
  readonly timeoutMs: number;
  readonly connectTimeoutMs: number;
  readonly lineCapBytes: number;
  readonly requestCapBytes: number;
  private readonly reconnect: { initialMs: number; maxMs: number } | false;

  private socket: net.Socket | undefined;
  private connecting: Promise<net.Socket> | undefined;
  private readonly pending = new Map<number, Pending>();
  private readonly readers = new WeakMap<net.Socket, LineBuffer>();
  private nextId = 1;
  /** undefined: not subscribed; null: every event; else the events named. */
  private subscription: string[] | null | undefined = undefined;
  private subscribedOn: { sock: net.Socket; key: string; result: Promise<string[]> } | undefined;
  private readonly notificationListeners = new Set<Listener<[Notification]>>();
  private readonly stateListeners = new Set<Listener<[ConnectionState, string | undefined]>>();
  private reconnectTimer: NodeJS.Timeout | undefined;
  /** A connection was given up after a STOPPING answer since the last one opened. */
  private retiredSince = false;
  private backoffMs: number;
  private state: ConnectionState | undefined;
  private closed = false;
  /** Why the daemon is down, for the status line. */
  lastError: string | undefined;

  constructor(options: ClientOptions) {
    this.socketPath = options.socketPath;
    this.timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.connectTimeoutMs = options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS;
    this.lineCapBytes = options.lineCapBytes ?? DEFAULT_LINE_CAP_BYTES;
    this.requestCapBytes = options.requestCapBytes ?? DEFAULT_REQUEST_CAP_BYTES;
    this.reconnect = options.reconnect === undefined ? DEFAULT_RECONNECT : options.reconnect;
    this.backoffMs = this.reconnect ? this.reconnect.initialMs : 0;
  }

  /** The daemon answered on the current connection (a connect alone is not enough). */
  get isUp(): boolean {
    return this.state === "up";
  }

  get inFlight(): number {
    return this.pending.size;
  }

  onNotification(listener: (n: Notification) => void): () => void {
    this.notificationListeners.add(listener);
    return () => this.notificationListeners.delete(listener);
  }

  onStateChange(listener: (state: ConnectionState, detail: string | undefined) => void): () => void {
    this.stateListeners.add(listener);
    return () => this.stateListeners.delete(listener);
  }

  /**
   * Connect now (calls connect on their own; this is for showing the state early). The state is
   * "up" once the daemon answers on the connection (the subscription renewed on it, a call).
   */
  async connect(): Promise<void> {
    await this.ensureSocket();
  }

  /**
   * Send one request; resolves with its result, rejects with RpcError, DaemonUnavailable,
   * RpcTimeout or ProtocolError. The timeout covers connecting too, so nothing waits longer.
   */
  call<T = unknown>(method: string, params?: object, options?: { timeoutMs?: number; resend?: boolean }): Promise<T> {
    if (this.closed) {
      return Promise.reject(new DaemonUnavailable("the memoryd client is closed", this.socketPath));
    }
    const timeoutMs = options?.timeoutMs ?? this.timeoutMs;
    const id = this.nextId++;
    const request: Record<string, unknown> = { jsonrpc: "2.0", id, method };
    if (params !== undefined) {
      request.params = params;
    }
    const line = JSON.stringify(request) + "\n";
    const size = Buffer.byteLength(line);
    if (size > this.requestCapBytes) {
      // Refused here, not by the daemon closing the connection under every other call.
      return Promise.reject(new ProtocolError(`${method} request of ${size} bytes is over the cap of ${this.requestCapBytes} bytes; nothing was sent`));
    }
    return new Promise<T>((resolve, reject) => {
      const expire = (): void => {
        const entry = this.pending.get(id);
        if (entry === undefined) {
          return;
        }
        const reader = entry.sock && this.readers.get(entry.sock);
        let why = `memoryd did not answer ${method} within ${timeoutMs} ms`;
        if (reader !== undefined && reader.buffered > 0 && reader.received > entry.seen) {
          const leftMs = capMs - (performance.now() - entry.started);
          if (leftMs >= 1) {
            // A reply is coming in (a line begun, read since the request or the last look): one
            // longer than the socket buffers that came while the host was held up past the
            // deadline is only partly read by now. Waited for while it keeps coming, up to
            // MAX_TIMEOUTS timeouts in all; one that stops for a whole timeout fails as one
            // never sent.
            entry.seen = reader.received;
            entry.timer = ioDeadline(expire, Math.min(timeoutMs, Math.floor(leftMs)));
            return;
          }
          // Still coming in (a trickle, or another call's reply while this one is never
          // answered) after MAX_TIMEOUTS timeouts.
          why = `memoryd did not finish answering ${method} within ${capMs} ms (${MAX_TIMEOUTS} timeouts)`;
        }
        this.pending.delete(id);
        reject(new RpcTimeout(why));
        this.dropIfRetired(entry.sock);
      };
      const capMs = timeoutMs * MAX_TIMEOUTS;
      const timer = ioDeadline(expire, timeoutMs);
      this.pending.set(id, { method, line, sock: undefined, resent: options?.resend === false, seen: 0, started: performance.now(), resolve: resolve as (v: unknown) => void, reject, timer });
      this.send(id);
    });
  }

  /** Write call `id`'s request on the connection, opening one if there is none. */
  private send(id: number): void {
    this.ensureSocket().then(
      (sock) => {
        const entry = this.pending.get(id);
        if (entry === undefined) {
          return;
        }
        if (sock.destroyed || !sock.writable) {
          this.settle(id, new DaemonUnavailable("connection to memoryd lost", this.socketPath));
          return;
        }
        entry.sock = sock;
        entry.seen = this.readers.get(sock)?.received ?? 0;
        sock.write(entry.line);
      },
      (error: Error) => this.settle(id, error),
    );
  }

  /**
   * Receive notifications on this connection (all events, or those named; `[]` none, which
   * unsubscribes, as the daemon reads it), and again on every later connection. While the
   * daemon is down this rejects, and subscribes when it comes back.
   */
  async subscribe(events?: string[]): Promise<string[]> {
    // `[]` was taken for every event, the opposite of what it says (the daemon's own reading
    // before session 17).
    this.subscription = events === undefined ? null : [...events];
    return this.subscribeOn(await this.ensureSocket());
  }

  /**
   * `again`: a STOPPING answer subscribes once more on the next connection. Not left to the
   * call's own resend: the next connection subscribes as it opens, and both would be sent.
   */
  private subscribeOn(sock: net.Socket, again = true): Promise<string[]> {
    const key = JSON.stringify(this.subscription);
    if (this.subscribedOn && this.subscribedOn.sock === sock && this.subscribedOn.key === key) {
      return this.subscribedOn.result; // sent once per connection
    }
    const params = this.subscription ? { events: this.subscription } : {};
    const sent = this.call<{ subscribed: string[] }>("subscribe", params, { resend: false });
    const result = sent.then(
      (r) => r.subscribed,
      (error: unknown) => {
        if (this.subscribedOn === entry) {
          this.subscribedOn = undefined;
        }
        if (again && error instanceof RpcError && error.code === STOPPING) {
          return this.ensureSocket().then((next) => this.subscribeOn(next, false));
        }
        throw error;
      },
    );
    const entry = { sock, key, result };
    this.subscribedOn = entry;
    return result;
  }

  close(): void {
    this.closed = true;
    if (this.reconnectTimer) {
      clearTimeout(this.reconnectTimer);
      this.reconnectTimer = undefined;
    }
    this.rejectAll(new DaemonUnavailable("the memoryd client is closed", this.socketPath));
    this.socket?.destroy();
    this.socket = undefined;
  }

  private settle(id: number, error: Error): void {
    const entry = this.pending.get(id);
    if (entry) {
      this.pending.delete(id);
      clearTimeout(entry.timer);
      entry.reject(error);
      this.dropIfRetired(entry.sock);
    }
  }

  private rejectAll(error: Error): void {
    for (const id of [...this.pending.keys()]) {
      this.settle(id, error);
    }
  }

  /** Fail the calls written on `sock` (a call still connecting is the new connection's). */
  private rejectOn(sock: net.Socket, error: Error): void {
    for (const [id, entry] of [...this.pending]) {
      if (entry.sock === sock) {
        this.settle(id, error);
      }
    }
  }

  /**
   * A daemon that answers STOPPING is going away: its connection is given up as a lost one
   * (later calls, and the subscription, go on a new connection), kept only until the calls
   * written on it before are answered (started before the stop, their replies still come).
   */
  private retire(sock: net.Socket): void {
    if (this.socket === sock) {
      this.socket = undefined;
      this.retiredSince = true;
    }
    this.dropIfRetired(sock);
  }

  /** Close a given-up connection once no call waits on it. */
  private dropIfRetired(sock: net.Socket | undefined): void {
    if (sock === undefined || sock === this.socket || sock.destroyed) {
      return;
    }
    for (const entry of this.pending.values()) {
      if (entry.sock === sock) {
        return;
      }
    }
    sock.destroy();
  }

  private ensureSocket(): Promise<net.Socket> {
    if (this.socket && !this.socket.destroyed) {
      return Promise.resolve(this.socket);
    }
    if (!this.connecting) {
      this.connecting = this.open().finally(() => {
        this.connecting = undefined;
      });
    }
    return this.connecting;
  }

  /**
   * Connect, retrying briefly while the daemon is busy or restarting (a full accept backlog:
   * EAGAIN; not listening yet: ECONNREFUSED), as memoryd_client's Connector does; a missing
   * socket (ENOENT), and a folder, regular file or FIFO in its place, are reported at once.
   */
  private async open(): Promise<net.Socket> {
    let left = CONNECT_RETRY_MS;
    let pause = 10;
    const long = socketPathTooLong(this.socketPath);
    if (long !== undefined) {
      const message = `memoryd is not running on ${this.socketPath}: ${long}`;
      this.markDown(message);
      throw new DaemonUnavailable(message, this.socketPath);
    }
    for (;;) {
      const why = untrustedSocket(this.socketPath);
      if (why !== undefined) {
        const message = `refusing to connect to ${this.socketPath}: ${why}`;
        this.markDown(message);
        throw new DaemonUnavailable(message, this.socketPath);
      }
      try {
        return await this.openOnce();
      } catch (error) {
        const code = (error as NodeJS.ErrnoException).code;
        const other = code !== undefined && NOT_LISTENING_CODES.has(code) ? notASocket(this.socketPath) : undefined;
        if (other !== undefined) {
          const message = `memoryd is not running on ${this.socketPath}: ${other}`;
          this.markDown(message);
          throw new DaemonUnavailable(message, this.socketPath);
        }
        if (!this.closed && left > 0 && code !== undefined && BUSY_CODES.has(code)) {
          const wait = Math.min(pause, left);
          left -= wait;
          pause = Math.min(pause * 2, 200);
          await new Promise((r) => setTimeout(r, wait));
          continue;
        }
        const message =
          error instanceof DaemonUnavailable
            ? error.message
            : `memoryd is not running on ${this.socketPath} (${code ?? (error as Error).message}); start it with \`memctl start\``;
        this.markDown(message);
        throw error instanceof DaemonUnavailable ? error : new DaemonUnavailable(message, this.socketPath);
      }
    }
  }

  /** One connection attempt; rejects with the socket's error (its errno code kept). */
  private openOnce(): Promise<net.Socket> {
    return new Promise<net.Socket>((resolve, reject) => {
      const sock = net.createConnection({ path: this.socketPath });
      let connected = false;
      const timer = ioDeadline(() => {
        if (connected) {
          return; // the connect was handled after the timer fired
        }
        sock.destroy();
        const message = `memoryd did not accept a connection on ${this.socketPath} within ${this.connectTimeoutMs} ms`;
        reject(new DaemonUnavailable(message, this.socketPath));
      }, this.connectTimeoutMs);
      sock.once("connect", () => {
        clearTimeout(timer);
        if (this.closed) {
          sock.destroy();
          reject(new DaemonUnavailable("the memoryd client is closed", this.socketPath));
          return;
        }
        connected = true;
        this.socket = sock;
        // Not "up" yet: that waits for the daemon's first answer on it (`answered`).
        resolve(sock);
        // One that replaces a stopping daemon's does not subscribe again on a STOPPING answer
        // of its own: a daemon answering so on each connection would be asked in a tight loop.
        const again = !this.retiredSince;
        this.retiredSince = false;
        if (this.subscription !== undefined) {
          // Subscribe again on the new connection so notifications keep coming.
          this.subscribeOn(sock, again).catch(() => undefined);
        }
      });
      const reader: LineBuffer = { chunks: [], buffered: 0, received: 0 }; // each connection its own
      this.readers.set(sock, reader);
      sock.on("data", (chunk: Buffer) => this.onData(sock, reader, chunk));
      sock.on("error", (error: NodeJS.ErrnoException) => {
        if (connected) {
          return; // "close" follows and reports it
        }
        clearTimeout(timer);
        reject(error);
      });
      sock.on("close", () => {
        if (!connected) {
          return;
        }
        if (this.socket !== sock) {
          // given up after a STOPPING answer (or replaced): a call on it with no answer is
          // not sent again, as the daemon may have started it
          this.rejectOn(sock, new DaemonUnavailable("connection to memoryd lost (the daemon stopped)", this.socketPath));
          return;
        }
        this.socket = undefined;
        const message = this.lastError ?? "connection to memoryd lost (the daemon stopped or restarted)";
        this.rejectOn(sock, new DaemonUnavailable(message, this.socketPath));
        this.markDown(message);
      });
    });
  }

  /**
   * The daemon answered on the current connection: it is up. Not at the connect: a daemon
   * killed by SIGKILL closes its connections before its listening socket (the kernel releases
   * them in turn, and may pause in between on a loaded machine), and a connect in that gap
   * succeeds into a backlog nobody will accept, reset a moment later. Counted as up, that was a
   * second outage warning for one outage (and the backoff started over at its shortest).
   */
  private answered(): void {
    this.backoffMs = this.reconnect ? this.reconnect.initialMs : 0;
    this.lastError = undefined;
    this.setState("up", undefined);
  }

  private markDown(message: string): void {
    if (this.closed) {
      return;
    }
    this.lastError = message;
    this.setState("down", message);
    this.scheduleReconnect();
  }

  private scheduleReconnect(): void {
    if (!this.reconnect || this.closed || this.reconnectTimer) {
      return;
    }
    const delay = this.backoffMs;
    this.backoffMs = Math.min(this.backoffMs * 2, this.reconnect.maxMs);
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = undefined;
      // A failure schedules the next try. A new connection is up once answered: the
      // subscription renewed on it is asked, or else `status`.
      if (this.subscription === undefined) {
        this.call("status", undefined, { resend: false }).catch(() => undefined);
      } else {
        this.ensureSocket().catch(() => undefined);
      }
    }, delay);
    this.reconnectTimer.unref(); // never keeps a process alive on its own
  }

  private setState(state: ConnectionState, detail: string | undefined): void {
    if (this.state === state) {
      return;
    }
    this.state = state;
    for (const listener of this.stateListeners) {
      try {
        listener(state, detail);
      } catch {
        // a listener's failure is its own
      }
    }
  }

  /** Drop the connection after a framing problem: every call in flight on it gets `error`. */
  private fail(sock: net.Socket, reader: LineBuffer, error: Error): void {
    const current = this.socket === sock;
    if (current) {
      this.socket = undefined; // its "close" then reports nothing more
    }
    this.rejectOn(sock, error);
    reader.chunks = [];
    reader.buffered = 0;
    sock.destroy();
    if (current) {
      this.markDown(error.message);
    }
  }

  private onData(sock: net.Socket, reader: LineBuffer, chunk: Buffer): void {
    if (sock.destroyed) {
      return;
    }
    reader.received += chunk.length;
    let start = 0;
    for (;;) {
      const newline = chunk.indexOf(10, start);
      if (newline === -1) {
        break;
      }
      const piece = chunk.subarray(start, newline);
      if (reader.buffered + piece.length > this.lineCapBytes) {
        this.fail(sock, reader, this.overCap());
        return;
      }
      const line = reader.buffered ? Buffer.concat([...reader.chunks, piece]) : piece;
      reader.chunks = [];
      reader.buffered = 0;
      this.onLine(sock, reader, line);
      if (sock.destroyed) {
        return;
      }
      start = newline + 1;
    }
    if (start < chunk.length) {
      const rest = chunk.subarray(start);
      if (reader.buffered + rest.length > this.lineCapBytes) {
        this.fail(sock, reader, this.overCap());
        return;
      }
      reader.chunks.push(rest);
      reader.buffered += rest.length;
    }
  }

  private overCap(): ProtocolError {
    return new ProtocolError(
      `memoryd sent a reply line over the client's cap of ${this.lineCapBytes} bytes; ` +
        "the connection was reset (raise memoryd.lineCapBytes if this reply is expected)",
    );
  }

  private onLine(sock: net.Socket, reader: LineBuffer, line: Buffer): void {
    const text = line.toString("utf8").trim();
    if (!text) {
      return;
    }
    let message: unknown;
    try {
      message = JSON.parse(text);
    } catch {
      const preview = text.length > 80 ? `${text.slice(0, 80)}…` : text;
      this.fail(sock, reader, new ProtocolError(`memoryd sent a reply that is not JSON: ${JSON.stringify(preview)}`));
      return;
    }
    for (const item of Array.isArray(message) ? message : [message]) {
      this.onMessage(sock, item);
    }
  }

  private onMessage(sock: net.Socket, message: unknown): void {
    if (typeof message !== "object" || message === null) {
      return;
    }
    const m = message as Record<string, unknown>;
    const current = this.socket === sock;
    // A -32006 says this daemon is going away, not that it is up: the state waits for the next
    // one (and its listeners' calls are not written on the connection being given up).
    if (current && (m.error as { code?: unknown } | null | undefined)?.code !== STOPPING) {
      this.answered();
    }
    if (typeof m.method === "string" && m.id === undefined) {
      if (!current) {
        return; // a given-up connection's: the new one's subscription brings them
      }
      const params = typeof m.params === "object" && m.params !== null ? (m.params as Record<string, unknown>) : {};
      const notification: Notification = { method: m.method, params };
      for (const listener of this.notificationListeners) {
        try {
          listener(notification);
        } catch {
          // a listener's failure never stops the others
        }
      }
      return;
    }
    const error = m.error as { code?: unknown; message?: unknown; data?: unknown } | undefined | null;
    if (m.id === null && error) {
      // A connection-level error (e.g. our request was over the daemon's cap); the daemon closes next.
      if (current) {
        this.lastError = `memoryd: ${String(error.message ?? "error")}`;
      }
      return;
    }
    if (typeof m.id !== "number") {
      return;
    }
    const entry = this.pending.get(m.id);
    if (!entry || entry.sock !== sock) {
      return; // answered after its timeout
    }
    const code = error ? (typeof error.code === "number" ? error.code : -32603) : undefined;
    if (code === STOPPING) {
      // Nothing was done and this daemon is going away: as memoryd_client does, the request is
      // sent once more, on a new connection opened with the connect retry (the next daemon, or
      // a service manager holding the socket), within the call's own timeout.
      if (!entry.resent) {
        entry.resent = true;
        entry.sock = undefined; // no longer waited for on `sock`
        this.retire(sock);
        this.send(m.id);
        return;
      }
      this.retire(sock);
      if (this.socket === undefined && this.connecting === undefined) {
        this.scheduleReconnect(); // so the subscription is renewed with no call to open one
      }
    }
    this.pending.delete(m.id);
    clearTimeout(entry.timer);
    if (error) {
      entry.reject(new RpcError(code ?? -32603, String(error.message ?? "error"), error.data));
    } else {
      entry.resolve(m.result);
    }
    this.dropIfRetired(sock);
  }
}
