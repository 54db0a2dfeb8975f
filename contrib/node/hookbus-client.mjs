// A dependency-free Node.js (18+) client of `hookbus serve`: JSON-RPC 2.0 over a Unix
// socket, one JSON object per line. The Python client (hookbus/client.py) is the model.
//
//   import { connect } from "./hookbus-client.mjs";
//   const client = await connect();               // or connect({ home, socket })
//   const decision = await client.emit("PreToolUse", { tool_name: "bash", tool_input: {} });
//   if (decision.behavior === "deny") ...
//   client.close();
//
// Run directly, it is a tiny `hookbus emit`:
//   node hookbus-client.mjs EVENT < envelope.json   (exit 2 on deny, 0 otherwise, 1 on error)

import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";

/** The longest line either side accepts (hookbus/protocol.py), its newline excluded. */
export const MAX_LINE_BYTES = 16 * 1024 * 1024;
// sun_path holds 108 bytes with its NUL; a longer path is reached through /proc/self/fd.
const SUN_PATH_MAX = 107;
// How long a connect waits while the server's accept queue is full.
const CONNECT_TIMEOUT_MS = 5000;

/** The server answered with an error: `code` is JSON-RPC's or hookbus's own, `data` extra detail. */
export class RemoteError extends Error {
  constructor(code, message, data) {
    super(message);
    this.name = "RemoteError";
    this.code = code;
    this.data = data;
  }
}

// Python's os.path.expanduser for the forms that matter here ("~" and "~/..."; not "~user").
function expandUser(p) {
  return p === "~" || p.startsWith("~/") ? path.join(os.homedir(), p.slice(1)) : p;
}

/** The home's absolute path: `home`, else $VIX_HOME, else ~/.vix (as hookbus.serve.rendezvous.home_root). */
export function homeRoot(home) {
  return path.resolve(expandUser(home || process.env.VIX_HOME || "~/.vix"));
}

/** `socket`, else $HOOKBUS_SOCKET, else HOME/run/hookbus.sock (as hookbus.serve.rendezvous.socket_path). */
export function socketPath(socket, home) {
  const chosen = socket || process.env.HOOKBUS_SOCKET || path.join(homeRoot(home), "run", "hookbus.sock");
  return path.resolve(expandUser(chosen));
}

function connectOnce(address) {
  return new Promise((resolve, reject) => {
    const s = net.createConnection(address);
    s.once("error", reject);
    s.once("connect", () => { s.off("error", reject); resolve(s); });
  });
}

/** A connected client. Resolves once connected; rejects when no server answers on the socket. */
export async function connect({ socket, home } = {}) {
  const where = socketPath(socket, home);
  // The Python client asks the kernel who the server is (SO_PEERCRED), which Node cannot.
  // The next best thing: the socket file must be ours or root's, since its decisions are obeyed.
  let owner;
  try {
    owner = fs.statSync(where).uid;
  } catch (error) {
    throw Object.assign(new Error(`no server on ${where}: ${error.code}`), { code: error.code });
  }
  const me = process.getuid();
  if (owner !== me && owner !== 0) {
    throw new Error(`the socket ${where} belongs to uid ${owner}, not to you (uid ${me}) or root; nothing was sent to it`);
  }
  let directory = null;
  let address = where;
  if (Buffer.byteLength(where) > SUN_PATH_MAX) {
    directory = fs.openSync(path.dirname(where), fs.constants.O_RDONLY | fs.constants.O_DIRECTORY);
    address = `/proc/self/fd/${directory}/${path.basename(where)}`;
  }
  try {
    // libuv connects without blocking, so a server whose accept queue is full answers EAGAIN
    // at once: wait for room, as the Python client does, up to CONNECT_TIMEOUT_MS.
    const deadline = Date.now() + CONNECT_TIMEOUT_MS;
    for (let pause = 1; ; pause = Math.min(pause * 2, 50)) {
      try {
        return new Client(where, await connectOnce(address));
      } catch (error) {
        if (error.code !== "EAGAIN") {
          throw Object.assign(new Error(`no server on ${where}: ${error.code}`), { code: error.code });
        }
        if (Date.now() >= deadline) {
          throw Object.assign(
            new Error(`the server on ${where} accepted no connection in ${CONNECT_TIMEOUT_MS / 1000} s: its queue of waiting connections is full (is it stopped, or overloaded?)`),
            { code: error.code },
          );
        }
        await new Promise((resolve) => setTimeout(resolve, pause));
      }
    }
  } finally {
    if (directory !== null) fs.closeSync(directory);
  }
}

/** One connection; any number of requests in flight, answered in any order and matched by id. */
export class Client {
  #pending = new Map(); // id -> { resolve, reject }
  #lastId = 0;
  #parts = []; // the pieces of a line not yet ended
  #partBytes = 0;
  #closed = null; // once closed: the Error that pending and later calls get

  constructor(where, sock) {
    this.path = where;
    this.socket = sock;
    sock.on("data", (chunk) => this.#received(chunk));
    sock.on("error", (error) => this.#fail(new Error(`the connection to ${where} failed: ${error.message}`)));
    sock.on("close", () => this.#fail(new Error(`the server on ${where} closed the connection before answering`)));
  }

  /** Send one request; its result, or a RemoteError (with .code and .data) if the server says no. */
  call(method, params) {
    if (this.#closed) return Promise.reject(this.#closed);
    const id = ++this.#lastId;
    const message = { jsonrpc: "2.0", id, method };
    if (params !== undefined) message.params = params;
    return new Promise((resolve, reject) => {
      this.#pending.set(id, { resolve, reject });
      this.socket.write(JSON.stringify(message) + "\n");
    });
  }

  /** A notification: the server runs it and answers nothing. */
  notify(method, params) {
    if (this.#closed) throw this.#closed;
    const message = { jsonrpc: "2.0", method };
    if (params !== undefined) message.params = params;
    this.socket.write(JSON.stringify(message) + "\n");
  }

  /** The decision: { behavior, reason?, input?, context? }. */
  emit(event, envelope = {}) { return this.call("emit", { event, envelope }); }
  /** Fire one hook now, whatever its trigger; its run record. */
  trigger(hookId, envelope = {}) { return this.call("trigger", { hook_id: hookId, envelope }); }
  /** { version, generation, home } of the server. */
  ping() { return this.call("ping"); }
  /** Re-read every hook now; { generation, hooks, problems } afterwards. */
  reload() { return this.call("reload"); }

  /** Close at once: requests still in flight are rejected (their hooks still run on the server). */
  close() {
    this.#fail(new Error(`the client of ${this.path} is closed`));
    // destroy, not end: the server keeps a half-closed connection open to send its answers,
    // so waiting for its end would wait forever.
    this.socket.destroy();
  }

  #received(chunk) {
    // Split bytes, not text: "\n" (0x0a) never occurs inside a UTF-8 sequence, and a
    // character cut between two chunks is decoded whole once its line is complete.
    let start = 0;
    let end;
    while ((end = chunk.indexOf(0x0a, start)) !== -1) {
      this.#parts.push(chunk.subarray(start, end));
      const line = Buffer.concat(this.#parts).toString("utf8");
      this.#parts = [];
      this.#partBytes = 0;
      start = end + 1;
      this.#answer(line);
      if (this.#closed) return;
    }
    if (start < chunk.length) {
      this.#parts.push(chunk.subarray(start));
      this.#partBytes += chunk.length - start;
      if (this.#partBytes > MAX_LINE_BYTES) {
        this.#fail(new Error(`the server on ${this.path} sent a line longer than ${MAX_LINE_BYTES} bytes`));
        this.socket.destroy();
      }
    }
  }

  #answer(line) {
    if (!line.trim()) return;
    let response;
    try {
      response = JSON.parse(line);
    } catch {
      this.#fail(new Error(`the server on ${this.path} sent something that is not JSON: ${line.slice(0, 200)}`));
      this.socket.destroy();
      return;
    }
    if (response === null || typeof response !== "object") return;
    const { id, error, result } = response;
    if (id === null || id === undefined) {
      // An error that answers no request: the server refuses the connection (permission
      // denied, line too large) and closes it. Pending requests are told why.
      if (error) this.#fail(new RemoteError(error.code, `the server on ${this.path}: ${error.message}`, error.data));
      return;
    }
    const waiting = this.#pending.get(id);
    if (!waiting) return;
    this.#pending.delete(id);
    if (error) waiting.reject(new RemoteError(error.code, String(error.message), error.data));
    else waiting.resolve(result);
  }

  #fail(reason) {
    if (!this.#closed) this.#closed = reason;
    for (const { reject } of this.#pending.values()) reject(this.#closed);
    this.#pending.clear();
  }
}

async function main(argv) {
  if (argv.length !== 1 || argv[0].startsWith("-")) {
    process.stderr.write("usage: node hookbus-client.mjs EVENT < envelope.json\n");
    return 1;
  }
  let text = "";
  if (!process.stdin.isTTY) {
    for await (const piece of process.stdin) text += piece;
  }
  let envelope = {};
  try {
    if (text.trim()) envelope = JSON.parse(text);
  } catch (error) {
    throw new Error(`the envelope is not valid JSON: ${error.message}`);
  }
  if (envelope === null || typeof envelope !== "object" || Array.isArray(envelope)) {
    throw new Error("the envelope must be a JSON object");
  }
  const client = await connect();
  try {
    const decision = await client.emit(argv[0], envelope);
    process.stdout.write(JSON.stringify(decision) + "\n");
    return decision.behavior === "deny" ? 2 : 0;
  } finally {
    client.close();
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(fs.realpathSync(process.argv[1])).href) {
  // exitCode, not exit(): stdout is written in full before the process ends.
  main(process.argv.slice(2)).then(
    (code) => { process.exitCode = code; },
    (error) => { process.stderr.write(`hookbus-client: ${error.message}\n`); process.exitCode = 1; },
  );
}
