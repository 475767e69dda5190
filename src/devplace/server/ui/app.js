// The dashboard: sign-in (when the API asks for a token), the views and their informers, and the actions, each
// shown only where a SelfSubjectAccessReview allows it and each the API's own request.

import { ApiError, Informer, keyOf, request, setToken, whenUnauthorized } from "/ui/api.js";
import { clear, el } from "/ui/dom.js";
import { documents, headOf } from "/ui/manifests.js";
import { KINDS, VIEWS, collectionPaths, groupVersionPath, idOf, objectPath } from "/ui/views.js";

const $ = (id) => document.getElementById(id);
const FIELD_MANAGER = "devplace-dashboard";

const state = {
  viewName: null,
  view: null,
  informers: {},
  caps: new Map(),
  simAllowed: false,
  signedIn: false,
  usesToken: false,
  simTimer: null,
  capsKnown: false,
  kindsByVersion: new Map(),
};

// The informers of a kind: one per group/version that stores it (`KINDS`), named `<kind>:<i>`.
function informersOf(kindName) {
  return KINDS[kindName].versions.map((_, i) => state.informers[`${kindName}:${i}`]);
}

const ctx = {
  can: (kindName, verb) => state.caps.get(`${kindName}:${verb}`) === true,
  ready: () =>
    state.capsKnown &&
    VIEWS[state.viewName].kinds.every((kind) => informersOf(kind).every((informer) => informer && informer.synced)),
  // Every object of a kind, in all its groups, sorted by namespace/name.
  list: (kindName) => {
    const objects = informersOf(kindName).flatMap((informer) => (informer ? [...informer.objects.values()] : []));
    const keyed = objects.map((obj) => [idOf(obj), obj]);
    keyed.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return keyed.map(([, obj]) => obj);
  },
  remove: (kindName, obj) => removeObject(kindName, obj),
};

// -- connection and notices -------------------------------------------------------------------------------------

function setConnection(stateName, detail) {
  const badge = $("connection");
  badge.dataset.state = stateName;
  badge.textContent = detail ? `${stateName}: ${detail}` : stateName;
}

function notice(message, isError) {
  const line = $("notice");
  line.textContent = message;
  line.className = isError ? "error" : "ok";
}

// -- views and informers ----------------------------------------------------------------------------------------

function listenerFor(kindName) {
  return {
    reset: () => {
      if (ctx.ready()) {
        setConnection("live");
        state.view.reset();
      }
    },
    event: (type, obj, informer) => {
      if (ctx.ready()) state.view.event(type, obj, informer);
      if (state.simAllowed) refreshSimSoon();
    },
    failed: (informer, error) => {
      const refused = error instanceof ApiError && (error.status === 401 || error.status === 403);
      setConnection(refused ? "refused" : "retrying", `${kindName}: ${error.message}`);
    },
  };
}

function stopInformers(keep) {
  for (const [name, informer] of Object.entries(state.informers)) {
    if (keep && keep.has(name.split(":")[0])) continue;
    informer.stop();
    delete state.informers[name];
  }
}

function showView(name) {
  if (!(name in VIEWS)) name = "nodes";
  state.viewName = name;
  for (const tab of document.querySelectorAll("#tabs button")) {
    if (tab.dataset.view === name) tab.setAttribute("aria-current", "page");
    else tab.removeAttribute("aria-current");
  }
  const needed = new Set(VIEWS[name].kinds);
  stopInformers(needed); // the browser holds 6 connections to a server: watch only what this view shows
  if (state.view && state.view.stop) state.view.stop(); // a view's own requests (the Classes view's) end with it
  state.view = VIEWS[name].create(ctx);
  $("view").replaceChildren(state.view.root);
  for (const kind of needed) {
    collectionPaths(KINDS[kind]).forEach((path, i) => {
      const informerName = `${kind}:${i}`;
      if (!state.informers[informerName]) {
        state.informers[informerName] = new Informer(informerName, path, listenerFor(kind)).start();
      }
    });
  }
  if (ctx.ready()) state.view.reset();
  if (location.hash !== `#${name}`) history.replaceState(null, "", `#${name}`);
}

// -- sign-in and what this identity may do ----------------------------------------------------------------------

async function review(verb, group, resource) {
  const answer = await request("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", {
    body: {
      apiVersion: "authorization.k8s.io/v1",
      kind: "SelfSubjectAccessReview",
      spec: { resourceAttributes: { verb, group, resource } },
    },
  });
  return answer.ok && answer.body && answer.body.status && answer.body.status.allowed === true;
}

async function capabilities() {
  state.caps = new Map();
  const checks = [];
  for (const [kindName, spec] of Object.entries(KINDS)) {
    for (const verb of ["create", "delete"]) {
      const group = spec.versions[0][0];
      checks.push(review(verb, group, spec.plural).then((allowed) => state.caps.set(`${kindName}:${verb}`, allowed)));
    }
  }
  checks.push(review("update", "", "nodes").then((allowed) => (state.simAllowed = allowed)));
  await Promise.all(checks);
  $("apply-panel").hidden = !Object.keys(KINDS).some((kindName) => ctx.can(kindName, "create"));
}

async function whoami() {
  const answer = await request("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", {
    body: { apiVersion: "authentication.k8s.io/v1", kind: "SelfSubjectReview" },
  });
  const user = answer.ok && answer.body && answer.body.status && answer.body.status.userInfo;
  const who = $("whoami");
  clear(who);
  if (state.usesToken) {
    who.append(`signed in as ${user && user.username ? user.username : "?"} `);
    const out = el("button", { type: "button", id: "sign-out" }, "Sign out");
    out.addEventListener("click", () => signOut(""));
    who.append(out);
  } else {
    who.textContent = "no authentication";
  }
}

function showLogin(message) {
  state.signedIn = false;
  $("layout").hidden = true;
  $("login").hidden = false;
  $("login-error").textContent = message || "";
  setConnection("signed out");
  $("token").focus();
}

function signOut(message) {
  setToken(null);
  state.usesToken = false;
  stopInformers(null);
  if (state.view && state.view.stop) state.view.stop();
  clear($("whoami"));
  showLogin(message);
}

async function enter() {
  state.signedIn = true;
  $("login").hidden = true;
  $("layout").hidden = false;
  setConnection("connecting");
  state.capsKnown = false;
  const reviews = Promise.all([whoami(), capabilities()]);
  showView(location.hash.slice(1)); // the lists load while the reviews are answered; rows wait for both
  await reviews;
  state.capsKnown = true;
  if (ctx.ready()) {
    setConnection("live");
    state.view.reset();
  }
  await refreshSim();
}

async function signIn(event) {
  event.preventDefault();
  const token = $("token").value.trim();
  $("token").value = "";
  if (!token) return;
  setToken(token);
  const probe = await request("GET", "/api/v1/nodes?limit=1");
  if (probe.status === 401) {
    setToken(null);
    $("login-error").textContent = "The server refused this token.";
    return;
  }
  state.usesToken = true;
  await enter();
}

// -- actions ----------------------------------------------------------------------------------------------------

async function removeObject(kindName, obj) {
  const spec = KINDS[kindName];
  const answer = await request("DELETE", objectPath(spec, obj));
  if (answer.ok) notice(`Deleted ${spec.kind} ${keyOf(obj)}.`, false);
  else notice(`${spec.kind} ${keyOf(obj)} was not deleted: ${(answer.body && answer.body.message) || answer.status}`, true);
}

function fieldErrors(list, items, prefix) {
  for (const item of items) {
    list.append(
      el(
        "li",
        { class: "field-error", "data-field": item.field },
        prefix || "",
        el("code", null, item.field),
        ": ",
        item.message,
      ),
    );
  }
}

function causesOf(answer) {
  const causes = answer.body && answer.body.details && Array.isArray(answer.body.details.causes)
    ? answer.body.details.causes
    : [];
  if (causes.length) {
    return causes.map((cause) => ({ field: String(cause.field || "(object)"), message: String(cause.message || cause.reason || "") }));
  }
  return [{ field: "(object)", message: String((answer.body && answer.body.message) || `HTTP ${answer.status}`) }];
}

// The served kind of a manifest's apiVersion and kind, from discovery (cached per apiVersion).
async function resolveKind(apiVersion, kind) {
  if (!state.kindsByVersion.has(apiVersion)) {
    const slash = apiVersion.indexOf("/");
    const group = slash < 0 ? "" : apiVersion.slice(0, slash);
    const version = slash < 0 ? apiVersion : apiVersion.slice(slash + 1);
    const spec = { group, version };
    const answer = await request("GET", groupVersionPath(group, version));
    if (!answer.ok) throw new ApiError(answer.status, { message: `apiVersion ${apiVersion} is not served here` });
    state.kindsByVersion.set(
      apiVersion,
      (answer.body.resources || [])
        .filter((resource) => !resource.name.includes("/"))
        .map((resource) => ({ ...spec, kind: resource.kind, plural: resource.name, namespaced: resource.namespaced })),
    );
  }
  const found = state.kindsByVersion.get(apiVersion).find((spec) => spec.kind === kind);
  if (!found) throw new ApiError(404, { message: `apiVersion ${apiVersion} serves no kind ${kind}` });
  return found;
}

async function applyManifests() {
  const errorsList = clear($("apply-errors"));
  const results = clear($("apply-results"));
  const docs = documents($("manifest").value);
  if (!docs.length) {
    fieldErrors(errorsList, [{ field: "manifest", message: "is empty" }]);
    return;
  }
  for (const [index, doc] of docs.entries()) {
    const prefix = docs.length > 1 ? `document ${index + 1}: ` : "";
    const head = headOf(doc);
    const missing = ["apiVersion", "kind"].filter((field) => !head[field]);
    if (missing.length) {
      fieldErrors(errorsList, missing.map((field) => ({ field, message: "required (it says where the manifest goes)" })), prefix);
      return;
    }
    let spec;
    try {
      spec = await resolveKind(head.apiVersion, head.kind);
    } catch (error) {
      fieldErrors(errorsList, [{ field: error.status === 404 ? "kind" : "apiVersion", message: error.message }], prefix);
      return;
    }
    const scope = spec.namespaced ? `/namespaces/${encodeURIComponent(head.namespace || "default")}` : "";
    const base = `${groupVersionPath(spec.group, spec.version)}${scope}/${spec.plural}`;
    const answer = head.name
      ? await request("PATCH", `${base}/${encodeURIComponent(head.name)}?fieldManager=${FIELD_MANAGER}&force=true`, {
          body: doc,
          contentType: "application/apply-patch+yaml",
        })
      : await request("POST", `${base}?fieldManager=${FIELD_MANAGER}`, { body: doc, contentType: "application/yaml" });
    if (!answer.ok) {
      fieldErrors(errorsList, causesOf(answer), prefix);
      return;
    }
    results.append(el("li", null, `${spec.kind} ${keyOf(answer.body)} ${answer.status === 201 ? "created" : "applied"}`));
  }
}

// -- the simulator (only under `devplace up`, and only for identities that may update nodes) ---------------------

function refreshSimSoon() {
  if (state.simTimer !== null) return;
  state.simTimer = setTimeout(() => {
    state.simTimer = null;
    refreshSim();
  }, 400);
}

async function refreshSim() {
  if (!state.simAllowed || !state.signedIn) {
    $("sim-panel").hidden = true;
    return;
  }
  const answer = await request("GET", "/sim/v1");
  if (answer.status !== 200 || !answer.body) {
    $("sim-panel").hidden = true;
    return;
  }
  $("sim-panel").hidden = false;
  const nodes = Array.isArray(answer.body.nodes) ? answer.body.nodes : [];
  const devices = Array.isArray(answer.body.devices) ? answer.body.devices : [];
  $("sim-nodes").replaceChildren(
    ...nodes.map((node) => {
      const name = String(node.name);
      const button = el("button", { type: "button", "data-sim-node": name }, node.down ? "Bring up" : "Take down");
      button.addEventListener("click", () => step(node.down ? { "node-up": name } : { "node-down": name }));
      return el("li", { "data-node": name, "data-down": node.down ? "true" : "false" }, `${name} ${node.down ? "(down)" : "(up)"} `, button);
    }),
  );
  $("sim-devices").replaceChildren(
    ...devices.map((device) => {
      const id = String(device.id);
      const button = el("button", { type: "button", "data-unplug": id }, "Unplug");
      button.addEventListener("click", () => step({ unplug: { device: id } }));
      const shown = Object.entries(device.properties || {}).map(([key, value]) => `${key}=${value}`).join(", ");
      const where = Array.isArray(device.nodes) ? device.nodes.join(", ") : "";
      return el("li", { "data-device": id }, `${id} on ${where}${shown ? ` (${shown})` : ""} `, button);
    }),
  );
}

async function step(body) {
  const errorsList = clear($("sim-errors"));
  const answer = await request("POST", "/sim/v1/steps", { body });
  if (answer.ok && !(answer.body && answer.body.ok === false)) notice(`Done: ${Object.keys(body)[0]}.`, false);
  else if (answer.ok) fieldErrors(errorsList, [{ field: Object.keys(body)[0], message: String(answer.body.error) }]);
  else fieldErrors(errorsList, causesOf(answer));
  await refreshSim();
}

function plug() {
  const properties = {};
  for (const line of $("plug-properties").value.split(/\r?\n/)) {
    const at = line.indexOf("=");
    if (line.trim() && at > 0) properties[line.slice(0, at).trim()] = line.slice(at + 1).trim();
  }
  const nodes = $("plug-nodes").value.split(",").map((node) => node.trim()).filter(Boolean);
  step({ plug: { device: $("plug-device").value.trim(), nodes, properties } });
}

// -- start --------------------------------------------------------------------------------------------------------

async function start() {
  whenUnauthorized(() => {
    if (state.signedIn) signOut("The server no longer accepts the token (401). Sign in again.");
  });
  for (const tab of document.querySelectorAll("#tabs button")) {
    tab.addEventListener("click", () => {
      if (state.signedIn) showView(tab.dataset.view);
    });
  }
  window.addEventListener("hashchange", () => {
    if (state.signedIn && location.hash.slice(1) !== state.viewName) showView(location.hash.slice(1));
  });
  $("login").addEventListener("submit", signIn);
  $("apply").addEventListener("click", applyManifests);
  $("plug").addEventListener("click", plug);
  const probe = await request("GET", "/api/v1/nodes?limit=1");
  if (probe.status === 401) showLogin("");
  else await enter();
}

start();
