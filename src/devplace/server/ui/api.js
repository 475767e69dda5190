// The API as the page uses it: requests with the token, lists that follow `continue`, and informers (list, then
// watch from the list's resourceVersion; relist on 410 Expired). The token lives in this module's variable only.

let token = null;
let onUnauthorized = () => {};

export function setToken(value) {
  token = value ? value : null;
}

export function whenUnauthorized(callback) {
  onUnauthorized = callback;
}

function headers(extra) {
  const out = { Accept: "application/json", ...extra };
  if (token !== null) out.Authorization = `Bearer ${token}`;
  return out;
}

export class ApiError extends Error {
  constructor(status, body) {
    super((body && body.message) || `HTTP ${status}`);
    this.status = status;
    this.body = body;
  }
}

// One request: `{status, ok, body}`, the body parsed as JSON when it is JSON.
export async function request(method, path, { body, contentType, signal } = {}) {
  const init = { method, headers: headers(), signal, credentials: "omit", cache: "no-store", redirect: "error" };
  if (body !== undefined) {
    init.headers["Content-Type"] = contentType || "application/json";
    init.body = typeof body === "string" ? body : JSON.stringify(body);
  }
  const response = await fetch(path, init);
  const text = await response.text();
  let parsed = null;
  if (text) {
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = { message: text };
    }
  }
  if (response.status === 401) onUnauthorized();
  return { status: response.status, ok: response.ok, body: parsed };
}

export async function listAll(path, signal) {
  let items = [];
  let resourceVersion = "";
  let next = "";
  do {
    const query = next ? `?continue=${encodeURIComponent(next)}` : "";
    const answer = await request("GET", path + query, { signal });
    if (!answer.ok) throw new ApiError(answer.status, answer.body);
    items = items.concat(answer.body.items || []);
    const meta = answer.body.metadata || {};
    if (!resourceVersion) resourceVersion = meta.resourceVersion || "";
    next = meta.continue || "";
  } while (next);
  return { items, resourceVersion };
}

export function keyOf(obj) {
  const meta = obj.metadata || {};
  return meta.namespace ? `${meta.namespace}/${meta.name}` : String(meta.name);
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// A cache of one kind kept current by list + watch. `listener.reset(informer)` after every (re)list,
// `listener.event(type, obj, informer)` for each watch event, `listener.failed(error)` on errors it retries.
export class Informer {
  constructor(name, path, listener) {
    this.name = name;
    this.path = path;
    this.listener = listener;
    this.objects = new Map();
    this.synced = false;
    this.resourceVersion = "";
    this.controller = new AbortController();
  }

  start() {
    this.run();
    return this;
  }

  stop() {
    this.controller.abort();
  }

  get stopped() {
    return this.controller.signal.aborted;
  }

  async run() {
    let pause = 250;
    while (!this.stopped) {
      try {
        if (!this.resourceVersion) {
          const listed = await listAll(this.path, this.controller.signal);
          if (this.stopped) return;
          this.objects = new Map(listed.items.map((obj) => [keyOf(obj), obj]));
          this.resourceVersion = listed.resourceVersion;
          this.synced = true;
          this.listener.reset(this);
        }
        await this.watch();
        pause = 250;
      } catch (error) {
        if (this.stopped) return;
        this.listener.failed(this, error);
        if (error instanceof ApiError && (error.status === 401 || error.status === 403)) return;
        await sleep(pause);
        pause = Math.min(pause * 2, 5000);
      }
    }
  }

  async watch() {
    const query = `?watch=1&allowWatchBookmarks=true&resourceVersion=${encodeURIComponent(this.resourceVersion)}`;
    const response = await fetch(this.path + query, {
      headers: headers(),
      signal: this.controller.signal,
      credentials: "omit",
      cache: "no-store",
      redirect: "error",
    });
    if (response.status === 410) {
      this.resourceVersion = "";
      return;
    }
    if (!response.ok) {
      let body = null;
      try {
        body = await response.json();
      } catch {
        body = null;
      }
      if (response.status === 401) onUnauthorized();
      throw new ApiError(response.status, body);
    }
    await readLines(response, (event) => this.handle(event));
  }

  // Applies one watch event; false: the stream is over (an ERROR event).
  handle(event) {
    const obj = event.object || {};
    const meta = obj.metadata || {};
    if (event.type === "BOOKMARK") {
      if (meta.resourceVersion) this.resourceVersion = meta.resourceVersion;
      return true;
    }
    if (event.type === "ERROR") {
      if (obj.code === 410) {
        this.resourceVersion = "";
        return false;
      }
      throw new ApiError(obj.code || 500, obj);
    }
    const key = keyOf(obj);
    if (event.type === "DELETED") this.objects.delete(key);
    else this.objects.set(key, obj);
    if (meta.resourceVersion) this.resourceVersion = meta.resourceVersion;
    this.listener.event(event.type, obj, this);
    return true;
  }
}

// A watch across every kind (`/store/watch`, from now; NDJSON): `onOpen()` once the server has registered it (so a
// read made after it misses no later change), then `onEvent(event)` per event, until the stream ends (resolves),
// `signal` aborts, or the server refuses it (rejects with an `ApiError`). The Classes view uses it to learn that
// devices changed with one connection instead of an informer per kind (the browser holds 6 per server).
export async function watchAll(onOpen, onEvent, signal) {
  const response = await fetch("/store/watch?allowWatchBookmarks=true", {
    headers: headers({ Accept: "application/x-ndjson" }),
    signal,
    credentials: "omit",
    cache: "no-store",
    redirect: "error",
  });
  if (!response.ok) {
    if (response.status === 401) onUnauthorized();
    throw new ApiError(response.status, null);
  }
  onOpen();
  await readLines(response, (event) => {
    onEvent(event);
    return true;
  });
}

/** Reads a watch stream: one JSON event per line, handed to `onEvent` until it returns false or the stream ends. */
async function readLines(response, onEvent) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += decoder.decode(value, { stream: true });
    let newline = buffer.indexOf("\n");
    while (newline >= 0) {
      const line = buffer.slice(0, newline).trim();
      buffer = buffer.slice(newline + 1);
      if (line && !onEvent(JSON.parse(line))) return;
      newline = buffer.indexOf("\n");
    }
  }
}
