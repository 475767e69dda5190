// The five views. Each names the kinds it reads (the app keeps an informer per kind while the view shows) and renders
// from the informers' caches; the Instances view updates its rows in place per watch event, the others re-render.
// Field names are the stored kinds' (see `devplace get` and src/devplace/api); every value is shown as text.

import { el, empty, section, table } from "/ui/dom.js";
import { ApiError, keyOf, request, watchAll } from "/ui/api.js";

// Each kind the views read, with every group/version that stores it: devplace keeps akri.sh/v0 Instances and
// Configurations (Akri users' manifests) apart from devplace.io/v1alpha1 ones, so those two are watched in both.
export const KINDS = {
  nodes: { kind: "Node", plural: "nodes", namespaced: false, versions: [["", "v1"]] },
  pods: { kind: "Pod", plural: "pods", namespaced: true, versions: [["", "v1"]] },
  services: { kind: "Service", plural: "services", namespaced: true, versions: [["", "v1"]] },
  instances: {
    kind: "Instance",
    plural: "instances",
    namespaced: true,
    versions: [
      ["devplace.io", "v1alpha1"],
      ["akri.sh", "v0"],
    ],
  },
  configurations: {
    kind: "Configuration",
    plural: "configurations",
    namespaced: true,
    versions: [
      ["devplace.io", "v1alpha1"],
      ["akri.sh", "v0"],
    ],
  },
  resourceclasses: {
    kind: "ResourceClass",
    plural: "resourceclasses",
    namespaced: false,
    versions: [["devplace.io", "v1alpha1"]],
  },
  deviceclasses: { kind: "DeviceClass", plural: "deviceclasses", namespaced: false, versions: [["resource.k8s.io", "v1"]] },
  resourceclaims: {
    kind: "ResourceClaim",
    plural: "resourceclaims",
    namespaced: true,
    versions: [["resource.k8s.io", "v1"]],
  },
  clusters: { kind: "Cluster", plural: "clusters", namespaced: false, versions: [["fleet.devplace.io", "v1alpha1"]] },
  deploymentintentgroups: {
    kind: "DeploymentIntentGroup",
    plural: "deploymentintentgroups",
    namespaced: false,
    versions: [["fleet.devplace.io", "v1alpha1"]],
  },
};

export function groupVersionPath(group, version) {
  return group ? `/apis/${group}/${version}` : `/api/${version}`;
}

// The collections of a kind, one per group/version that stores it.
export function collectionPaths(spec) {
  return spec.versions.map(([group, version]) => `${groupVersionPath(group, version)}/${spec.plural}`);
}

// An object's own URL, from its apiVersion.
export function objectPath(spec, obj) {
  const meta = obj.metadata || {};
  const apiVersion = String(obj.apiVersion || spec.versions[0].filter(Boolean).join("/"));
  const root = apiVersion.includes("/") ? `/apis/${apiVersion}` : `/api/${apiVersion}`;
  const scope = spec.namespaced ? `/namespaces/${encodeURIComponent(meta.namespace || "default")}` : "";
  return `${root}${scope}/${spec.plural}/${encodeURIComponent(meta.name)}`;
}

// A key unique across the groups of a kind (the same name may exist in akri.sh and devplace.io).
export function idOf(obj) {
  return `${keyOf(obj)} ${obj.apiVersion || ""}`;
}

// -- small readers -----------------------------------------------------------------------------------------------

const dig = (obj, ...path) => path.reduce((at, key) => (at && typeof at === "object" ? at[key] : undefined), obj);
const list = (value) => (Array.isArray(value) ? value : []);
const record = (value) => (value && typeof value === "object" && !Array.isArray(value) ? value : {});
const text = (value) => (value === null || value === undefined || value === "" ? "—" : String(value));

function nameCell(obj) {
  return el("td", { class: "name" }, keyOf(obj));
}

function properties(map) {
  const entries = Object.entries(record(map)).sort(([a], [b]) => (a < b ? -1 : 1));
  if (!entries.length) return "—";
  return el(
    "dl",
    { class: "properties" },
    entries.map(([key, value]) => [el("dt", null, key), el("dd", null, text(value))]),
  );
}

// A slot holder, as devplace writes it: "" free, "<node>" IL, "C:<vdev>:<node>" CL, "D:<ns>/<claim>:<node>" DRA.
export function holderOf(raw) {
  const value = typeof raw === "string" ? raw : "";
  if (!value) return { kind: "free", text: "free" };
  if (value.startsWith("D:")) {
    const rest = value.slice(2);
    const at = rest.lastIndexOf(":");
    const node = rest.slice(at + 1);
    const claim = rest.slice(0, at);
    return { kind: "dra", node, text: `${node} · claim ${claim}` };
  }
  if (value.startsWith("C:")) {
    const rest = value.slice(2);
    const at = rest.indexOf(":");
    const node = rest.slice(at + 1);
    return { kind: "cl", node, text: `${node} · CL` };
  }
  return { kind: "il", node: value, text: `${value} · IL` };
}

function slotIndex(instance, slot) {
  const suffix = slot.startsWith(`${instance}-`) ? slot.slice(instance.length + 1) : "";
  return /^\d+$/.test(suffix) ? Number(suffix) : Number.MAX_SAFE_INTEGER;
}

export function deleteButton(ctx, kindName, obj) {
  if (!ctx.can(kindName, "delete")) return null;
  const spec = KINDS[kindName];
  const button = el("button", {
    type: "button",
    class: "delete",
    "data-delete": `${spec.kind}/${keyOf(obj)}`,
  });
  button.textContent = "Delete";
  let timer = null;
  button.addEventListener("click", () => {
    if (!button.classList.contains("armed")) {
      button.classList.add("armed");
      button.textContent = "Confirm delete";
      timer = setTimeout(() => {
        button.classList.remove("armed");
        button.textContent = "Delete";
      }, 4000);
      return;
    }
    clearTimeout(timer);
    button.disabled = true;
    ctx.remove(kindName, obj);
  });
  return el("td", { class: "act" }, button);
}

// -- Nodes x resources -------------------------------------------------------------------------------------------

function isExtended(resource) {
  const slash = resource.indexOf("/");
  if (slash < 0) return false;
  const domain = resource.slice(0, slash);
  return !(domain === "kubernetes.io" || domain.endsWith(".kubernetes.io") || domain === "requests");
}

function count(value) {
  if (typeof value === "number") return value;
  if (typeof value === "string" && /^\d+$/.test(value.trim())) return Number(value.trim());
  return null;
}

function terminated(pod) {
  const phase = dig(pod, "status", "phase");
  return phase === "Succeeded" || phase === "Failed";
}

// What bound, not terminated pods request on each node (extended resources: requests, else limits).
export function heldByNode(pods) {
  const held = new Map();
  for (const pod of pods) {
    const node = dig(pod, "spec", "nodeName");
    if (!node || terminated(pod)) continue;
    const sums = held.get(node) || new Map();
    for (const container of list(dig(pod, "spec", "containers"))) {
      const requests = record(dig(container, "resources", "requests"));
      const limits = record(dig(container, "resources", "limits"));
      for (const resource of new Set([...Object.keys(requests), ...Object.keys(limits)])) {
        if (!isExtended(resource)) continue;
        const amount = count(resource in requests ? requests[resource] : limits[resource]);
        if (amount !== null) sums.set(resource, (sums.get(resource) || 0) + amount);
      }
    }
    held.set(node, sums);
  }
  return held;
}

function nodeReady(node) {
  for (const condition of list(dig(node, "status", "conditions"))) {
    if (condition && condition.type === "Ready") return condition.status === "True" ? "Ready" : "NotReady";
  }
  return "Unknown";
}

function renderNodes(ctx) {
  const held = heldByNode(ctx.list("pods"));
  const rows = [];
  for (const node of ctx.list("nodes")) {
    const name = dig(node, "metadata", "name");
    const capacity = record(dig(node, "status", "capacity"));
    const allocatable = record(dig(node, "status", "allocatable"));
    const resources = [...new Set([...Object.keys(capacity), ...Object.keys(allocatable)])].filter(isExtended).sort();
    const sums = held.get(name) || new Map();
    for (const resource of sums.keys()) if (!resources.includes(resource)) resources.push(resource);
    const ready = nodeReady(node);
    const lead = (span) => [
      el("td", { class: "name", rowspan: span }, name),
      el("td", { rowspan: span, class: `ready ready-${ready}` }, ready),
    ];
    if (!resources.length) {
      rows.push(el("tr", { "data-node": name }, lead(1), el("td", { colspan: 6, class: "empty" }, "no devices")));
      continue;
    }
    resources.forEach((resource, i) => {
      const cap = count(capacity[resource]);
      const alloc = count(allocatable[resource]);
      const used = sums.get(resource) || 0;
      const unhealthy = cap !== null && alloc !== null ? cap - alloc : null;
      const available = alloc !== null ? alloc - used : null;
      rows.push(
        el(
          "tr",
          { "data-node": name, "data-resource": resource },
          i === 0 ? lead(resources.length) : null,
          el("td", { class: "resource" }, resource),
          el("td", { class: "num" }, text(capacity[resource])),
          el("td", { class: "num" }, text(allocatable[resource])),
          el("td", { class: "num held" }, String(used)),
          el("td", { class: available !== null && available < 0 ? "num over" : "num" }, text(available)),
          el("td", { class: unhealthy ? "num unhealthy" : "num" }, text(unhealthy)),
        ),
      );
    });
  }
  const headers = ["Node", "Status", "Resource", "Capacity", "Allocatable", "Held", "Available", "Unhealthy"];
  return section(
    "Nodes × resources",
    { id: "nodes" },
    el(
      "p",
      { class: "hint" },
      "Per node, each device-plugin resource as the kubelet reports it (capacity, allocatable); held: what pods ",
      "bound to the node request; unhealthy: capacity − allocatable.",
    ),
    rows.length ? table(headers, rows) : empty("No nodes."),
  );
}

// -- Instances (rows updated in place) ---------------------------------------------------------------------------

export function instanceHealth(instance) {
  const offline = dig(instance, "metadata", "annotations", "devplace.io/offline-since");
  if (offline) return { kind: "offline", text: `offline since ${offline}` };
  if (!list(dig(instance, "spec", "nodes")).length) return { kind: "unseen", text: "seen by no node" };
  return { kind: "online", text: "online" };
}

function instanceRow(ctx, instance) {
  const name = String(dig(instance, "metadata", "name"));
  const usage = record(dig(instance, "spec", "deviceUsage"));
  const slots = Object.keys(usage).sort((a, b) => slotIndex(name, a) - slotIndex(name, b) || (a < b ? -1 : 1));
  const health = instanceHealth(instance);
  return el(
    "tr",
    { "data-key": keyOf(instance) },
    nameCell(instance),
    el("td", null, text(dig(instance, "spec", "configurationName"))),
    el("td", { class: "nodes" }, list(dig(instance, "spec", "nodes")).join(", ") || "—"),
    el(
      "td",
      { class: "slots" },
      slots.map((slot) => {
        const holder = holderOf(usage[slot]);
        const index = slotIndex(name, slot);
        return el(
          "span",
          { class: `slot slot-${holder.kind}`, "data-slot": slot, "data-holder": usage[slot], title: `${slot}: ${usage[slot] || "free"}` },
          `${index === Number.MAX_SAFE_INTEGER ? slot : index}: ${holder.text}`,
        );
      }),
    ),
    el("td", null, properties(dig(instance, "spec", "brokerProperties"))),
    el("td", { class: `health health-${health.kind}` }, health.text),
    deleteButton(ctx, "instances", instance),
  );
}

class InstancesView {
  constructor(ctx) {
    this.ctx = ctx;
    this.rows = new Map();
    this.order = [];
    this.body = el("tbody");
    this.count = el("span", { class: "count" });
    const headers = ["Instance", "Configuration", "Nodes", "Slots", "Properties", "Health", ""];
    this.root = section(
      "Instances",
      { id: "instances" },
      el(
        "p",
        { class: "legend" },
        el("span", { class: "slot slot-free" }, "free"),
        el("span", { class: "slot slot-il" }, "IL: held by a node's Instance-level plugin"),
        el("span", { class: "slot slot-cl" }, "CL: by its Configuration-level plugin"),
        el("span", { class: "slot slot-dra" }, "claim: by a DRA ResourceClaim"),
        this.count,
      ),
      el(
        "table",
        null,
        el("thead", null, el("tr", null, headers.map((header) => el("th", { scope: "col" }, header)))),
        this.body,
      ),
    );
    this.rendered = false;
  }

  reset() {
    performance.mark("dp:instances:render:start");
    const objects = this.ctx.list("instances");
    this.order = objects.map(idOf);
    this.rows = new Map(objects.map((obj) => [idOf(obj), instanceRow(this.ctx, obj)]));
    this.body.replaceChildren(...this.rows.values());
    this.count.textContent = `${this.order.length} instances`;
    performance.measure("dp:instances:render", "dp:instances:render:start");
    if (!this.rendered) {
      this.rendered = true;
      performance.measure("dp:instances:first", { start: 0, end: performance.now() });
    }
  }

  event(type, obj) {
    const start = performance.now();
    const key = idOf(obj);
    const old = this.rows.get(key);
    if (type === "DELETED") {
      if (old) {
        old.remove();
        this.rows.delete(key);
        this.order.splice(this.position(key), 1);
      }
    } else if (old) {
      const row = instanceRow(this.ctx, obj);
      old.replaceWith(row);
      this.rows.set(key, row);
    } else {
      const row = instanceRow(this.ctx, obj);
      const at = this.position(key);
      this.order.splice(at, 0, key);
      const next = this.order[at + 1];
      this.body.insertBefore(row, next === undefined ? null : this.rows.get(next));
      this.rows.set(key, row);
    }
    this.count.textContent = `${this.order.length} instances`;
    const applied = performance.now();
    performance.measure("dp:instances:event", { start, end: applied });
    requestAnimationFrame(() => {
      const row = this.rows.get(key);
      if (row) row.getBoundingClientRect();
      performance.measure("dp:instances:event-frame", { start, end: performance.now() });
    });
  }

  position(key) {
    let low = 0;
    let high = this.order.length;
    while (low < high) {
      const middle = (low + high) >> 1;
      if (this.order[middle] < key) low = middle + 1;
      else high = middle;
    }
    return low;
  }
}

// -- Brokers ------------------------------------------------------------------------------------------------------

export function strategyOf(configuration) {
  const strategy = record(dig(configuration, "spec", "brokerStrategy"));
  if (Object.keys(strategy).length) return Object.keys(strategy).join(",");
  const broker = record(dig(configuration, "spec", "brokerSpec"));
  if ("brokerJobSpec" in broker) return "job";
  if ("brokerPodSpec" in broker) return "perNode";
  return "no brokers";
}

function scheduledMessage(pod) {
  for (const condition of list(dig(pod, "status", "conditions"))) {
    if (condition && condition.type === "PodScheduled" && condition.status !== "True") {
      return condition.message || condition.reason || "not scheduled";
    }
  }
  return dig(pod, "spec", "nodeName") ? "waiting for its node" : "not scheduled yet";
}

function pending(pod) {
  const phase = dig(pod, "status", "phase");
  return !phase || phase === "Pending";
}

function podRows(pods) {
  return pods.map((pod) =>
    el(
      "tr",
      { "data-key": keyOf(pod) },
      nameCell(pod),
      el("td", null, text(dig(pod, "spec", "nodeName"))),
      el("td", null, text(dig(pod, "status", "phase") || "Pending")),
      el("td", null, text(dig(pod, "metadata", "labels", "akri.sh/instance"))),
    ),
  );
}

function pendingRows(pods) {
  return pods.map((pod) =>
    el("tr", { "data-key": keyOf(pod) }, nameCell(pod), el("td", { class: "reason" }, scheduledMessage(pod))),
  );
}

function renderBrokers(ctx) {
  const pods = ctx.list("pods");
  const services = ctx.list("services");
  const cards = [];
  const brokerPods = new Set();
  for (const configuration of ctx.list("configurations")) {
    const name = dig(configuration, "metadata", "name");
    const namespace = dig(configuration, "metadata", "namespace") || "default";
    const mine = (obj) =>
      (dig(obj, "metadata", "namespace") || "default") === namespace &&
      dig(obj, "metadata", "labels", "akri.sh/configuration") === name;
    const brokers = pods.filter(mine).sort((a, b) => (keyOf(a) < keyOf(b) ? -1 : 1));
    brokers.forEach((pod) => brokerPods.add(keyOf(pod)));
    const counts = record(dig(configuration, "status", "brokers"));
    cards.push(
      el(
        "article",
        { class: "card", "data-key": keyOf(configuration) },
        el(
          "h3",
          null,
          keyOf(configuration),
          el("span", { class: "strategy" }, strategyOf(configuration)),
          el(
            "span",
            { class: "counts" },
            `desired ${text(counts.desired)} · running ${text(counts.running)} · pending ${text(counts.pending)}`,
          ),
          deleteButton(ctx, "configurations", configuration)?.firstChild,
        ),
        el("h4", null, "Broker pods"),
        brokers.length ? table(["Pod", "Node", "Phase", "Instance"], podRows(brokers)) : empty("No broker pods."),
        el("h4", null, "Services"),
        services.filter(mine).length
          ? table(
              ["Service", "Type", "Cluster IP"],
              services
                .filter(mine)
                .map((service) =>
                  el(
                    "tr",
                    null,
                    nameCell(service),
                    el("td", null, text(dig(service, "spec", "type") || "ClusterIP")),
                    el("td", null, text(dig(service, "spec", "clusterIP"))),
                  ),
                ),
            )
          : empty("No services."),
        el("h4", null, "Pending brokers"),
        brokers.filter(pending).length
          ? table(["Pod", "Why"], pendingRows(brokers.filter(pending)))
          : empty("None pending."),
      ),
    );
  }
  const others = pods.filter((pod) => pending(pod) && !brokerPods.has(keyOf(pod)));
  return section(
    "Brokers",
    { id: "brokers" },
    cards.length ? cards : empty("No Configurations."),
    el("h3", null, "Other pending pods"),
    others.length ? table(["Pod", "Why"], pendingRows(others), { id: "pending-pods" }) : empty("None."),
  );
}

// -- Classes ------------------------------------------------------------------------------------------------------

export function classSelector(resourceClass) {
  const terms = list(dig(resourceClass, "spec", "resourceSelector")).map((term) => {
    const expressions = list(dig(term, "matchExpressions")).map((expression) => {
      const values = list(dig(expression, "values")).map(String);
      const shown = !values.length ? "" : values.length === 1 ? ` ${values[0]}` : ` [${values.join(", ")}]`;
      return `${dig(expression, "key")} ${dig(expression, "operator")}${shown}`;
    });
    return expressions.join(" && ") || "(nothing)";
  });
  return terms.join(" || ") || "—";
}

export function claimState(claim) {
  const status = record(dig(claim, "status"));
  const states = [];
  if (dig(claim, "metadata", "deletionTimestamp")) states.push("deleted");
  if (status.allocation !== undefined && status.allocation !== null) {
    states.push("allocated");
    if (list(status.reservedFor).length) states.push("reserved");
  }
  return states.join(",") || "pending";
}

function allocationNodes(claim) {
  const nodes = [];
  for (const term of list(dig(claim, "status", "allocation", "nodeSelector", "nodeSelectorTerms"))) {
    for (const field of [...list(dig(term, "matchFields")), ...list(dig(term, "matchExpressions"))]) {
      nodes.push(...list(dig(field, "values")).map(String));
    }
  }
  return nodes.join(", ") || "—";
}

// What each class selects, as the API's `devices` subresource answers it (server/_classdevices.py): one cell.
function selectedDevices(answer, describe) {
  if (answer === undefined) return el("td", { class: "devices pending" }, "…");
  if (answer.error) return el("td", { class: "devices error" }, answer.error);
  const items = list(answer.items);
  return el(
    "td",
    { class: "devices" },
    items.map((item) => {
      const attributes = Object.entries(record(item.attributes)).map(([key, value]) => `${key}=${value}`);
      const attrs = { class: "device", "data-device": describe.id(item), title: attributes.join("\n") };
      return el("div", attrs, describe.text(item));
    }),
    items.length ? null : "none",
    answer.problem ? el("div", { class: "problem" }, String(answer.problem)) : null,
  );
}

const INSTANCE_DEVICE = {
  id: (item) => `${text(item.namespace)}/${text(item.name)}`,
  text: (item) => `${text(item.namespace)}/${text(item.name)} · ${list(item.nodes).join(", ") || "no node"}`,
};

const SLICE_DEVICE = {
  id: (item) => `${text(item.driver)}/${text(item.pool)}/${text(item.name)}`,
  text: (item) => {
    const nodes = item.allNodes ? "all nodes" : list(item.nodes).join(", ") || "selected nodes";
    return `${text(item.pool)}/${text(item.name)} · ${nodes}`;
  },
};

export function devicesPath(kindName, obj) {
  return `${objectPath(KINDS[kindName], obj)}/devices`;
}

function renderClasses(ctx, devices) {
  const classes = ctx.list("resourceclasses").map((resourceClass) =>
    el(
      "tr",
      { "data-key": keyOf(resourceClass) },
      nameCell(resourceClass),
      el("td", { class: "selector" }, classSelector(resourceClass)),
      el("td", null, text(dig(resourceClass, "spec", "selectionStrategy"))),
      el("td", { class: "num" }, text(dig(resourceClass, "status", "allocatable"))),
      el("td", { class: "num" }, text(dig(resourceClass, "status", "requested"))),
      selectedDevices(devices.get(`resourceclasses/${keyOf(resourceClass)}`), INSTANCE_DEVICE),
      deleteButton(ctx, "resourceclasses", resourceClass),
    ),
  );
  const deviceClasses = ctx.list("deviceclasses").map((deviceClass) =>
    el(
      "tr",
      { "data-key": keyOf(deviceClass) },
      nameCell(deviceClass),
      el(
        "td",
        { class: "selector" },
        list(dig(deviceClass, "spec", "selectors"))
          .map((selector) => dig(selector, "cel", "expression"))
          .filter(Boolean)
          .join(" && ") || "—",
      ),
      selectedDevices(devices.get(`deviceclasses/${keyOf(deviceClass)}`), SLICE_DEVICE),
      deleteButton(ctx, "deviceclasses", deviceClass),
    ),
  );
  const claims = ctx.list("resourceclaims").map((claim) =>
    el(
      "tr",
      { "data-key": keyOf(claim) },
      nameCell(claim),
      el("td", null, claimState(claim)),
      el(
        "td",
        null,
        list(dig(claim, "status", "allocation", "devices", "results")).map((result) =>
          el("div", null, `${text(dig(result, "request"))}: ${dig(result, "pool")}/${dig(result, "device")}`),
        ),
      ),
      el("td", null, allocationNodes(claim)),
      el("td", null, list(dig(claim, "status", "reservedFor")).map((ref) => text(dig(ref, "name"))).join(", ") || "—"),
      deleteButton(ctx, "resourceclaims", claim),
    ),
  );
  return section(
    "Classes",
    { id: "classes" },
    el("h3", null, "Resource classes"),
    classes.length
      ? table(["Class", "Selector", "Strategy", "Allocatable", "Requested", "Selected devices", ""], classes)
      : empty("No resource classes."),
    el("h3", null, "Device classes (DRA)"),
    deviceClasses.length
      ? table(["Class", "Selectors (CEL)", "Selected devices", ""], deviceClasses)
      : empty("No device classes."),
    el("h3", null, "Resource claims"),
    claims.length
      ? table(["Claim", "State", "Allocated devices", "Node", "Reserved for", ""], claims)
      : empty("No resource claims."),
  );
}

// -- Fleet --------------------------------------------------------------------------------------------------------

function clusterRef(entry) {
  return `${text(dig(entry, "clusterProvider"))}/${text(dig(entry, "cluster"))}`;
}

function decision(group) {
  const placement = record(dig(group, "status", "placement"));
  const apps = list(placement.apps);
  const parts = apps.map((app) =>
    el(
      "div",
      { class: "app", "data-app": dig(app, "name") },
      el("strong", null, text(dig(app, "name"))),
      el(
        "ul",
        { class: "chosen" },
        list(dig(app, "clusters")).map((cluster) =>
          el("li", null, `${clusterRef(cluster)} × ${text(dig(cluster, "replicas"))}`),
        ),
      ),
      el(
        "ul",
        { class: "rejected" },
        list(dig(app, "rejected")).map((cluster) =>
          el("li", null, `${clusterRef(cluster)}: ${text(dig(cluster, "reason"))}`),
        ),
      ),
    ),
  );
  for (const error of list(placement.errors)) parts.push(el("p", { class: "error" }, String(error)));
  return parts.length ? parts : "—";
}

function renderFleet(ctx) {
  const clusters = ctx.list("clusters").map((cluster) =>
    el(
      "tr",
      { "data-key": keyOf(cluster) },
      el("td", { class: "name" }, list(dig(cluster, "spec", "path")).join("/") || keyOf(cluster)),
      el("td", null, properties(dig(cluster, "spec", "labels"))),
      deleteButton(ctx, "clusters", cluster),
    ),
  );
  const groups = ctx.list("deploymentintentgroups").map((group) => {
    const state = dig(group, "status", "state") || "Created";
    return el(
      "tr",
      { "data-key": keyOf(group) },
      el("td", { class: "name" }, list(dig(group, "spec", "path")).join("/") || keyOf(group)),
      el("td", { class: `state state-${state}` }, state),
      el(
        "td",
        null,
        list(dig(group, "status", "actions"))
          .map((action) => `${text(dig(action, "state"))} ${dig(action, "time") || ""}`.trim())
          .join(" → ") || "—",
      ),
      el("td", null, decision(group)),
      deleteButton(ctx, "deploymentintentgroups", group),
    );
  });
  return section(
    "Fleet",
    { id: "fleet" },
    el("h3", null, "Clusters"),
    clusters.length ? table(["Cluster", "Labels", ""], clusters) : empty("No clusters."),
    el("h3", null, "Deployment intent groups"),
    groups.length
      ? table(["Group", "State", "Lifecycle", "Decision (chosen; rejected with reasons)", ""], groups)
      : empty("No deployment intent groups."),
  );
}

// -- the views the app shows --------------------------------------------------------------------------------------

class RenderedView {
  constructor(ctx, render) {
    this.ctx = ctx;
    this.draw = render;
    this.root = el("div");
    this.queued = false;
  }

  schedule() {
    if (this.queued) return;
    this.queued = true;
    requestAnimationFrame(() => {
      this.queued = false;
      if (this.ctx.ready()) this.root.replaceChildren(this.draw(this.ctx));
    });
  }

  reset() {
    this.schedule();
  }

  event() {
    this.schedule();
  }
}

// The Classes view: rendered as the others, plus what each class selects, read from the API's `devices` subresource
// when the view opens and again when classes change or devices may have (an Instance, a ResourceSlice or a
// Configuration changed: one `/store/watch` tells, not three more informers). Requests are coalesced: one read of
// every class per REFETCH_MS at most, and never two at once (a change during a read makes one more read after it).
const DEVICE_KINDS = new Set(["Instance", "ResourceSlice", "Configuration"]);
const CLASS_KINDS = new Set(["ResourceClass", "DeviceClass"]);
const REFETCH_MS = 250;
const pause = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

class ClassesView {
  constructor(ctx) {
    this.ctx = ctx;
    this.devices = new Map(); // "<plural>/<name>" -> a DeviceList body, or {error}
    this.rendered = new RenderedView(ctx, (c) => renderClasses(c, this.devices));
    this.root = this.rendered.root;
    this.controller = new AbortController();
    this.timer = null;
    this.reading = false;
    this.again = false;
    this.watching = false;
  }

  reset() {
    this.rendered.reset();
    this.refetchSoon();
    if (!this.watching) this.watchDevices();
  }

  event(type, obj) {
    this.rendered.event();
    if (CLASS_KINDS.has(dig(obj, "kind"))) this.refetchSoon();
  }

  stop() {
    this.controller.abort();
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
  }

  refetchSoon() {
    if (this.timer !== null || this.controller.signal.aborted) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      this.refetch();
    }, REFETCH_MS);
  }

  async refetch() {
    if (this.reading) {
      this.again = true;
      return;
    }
    this.reading = true;
    const signal = this.controller.signal;
    try {
      do {
        this.again = false;
        const targets = ["resourceclasses", "deviceclasses"].flatMap((kindName) =>
          this.ctx.list(kindName).map((obj) => [`${kindName}/${keyOf(obj)}`, devicesPath(kindName, obj)]),
        );
        const answers = await Promise.all(
          targets.map(async ([key, path]) => {
            const answer = await request("GET", path, { signal });
            const failed = { error: String(dig(answer.body, "message") || `HTTP ${answer.status}`) };
            return [key, answer.ok ? record(answer.body) : failed];
          }),
        );
        if (signal.aborted) return;
        this.devices = new Map(answers);
        this.rendered.schedule();
      } while (this.again && !signal.aborted);
    } catch {
      // a network failure or an abort: the next change reads again
    } finally {
      this.reading = false;
    }
  }

  async watchDevices() {
    this.watching = true;
    const signal = this.controller.signal;
    let wait = 250;
    while (!signal.aborted) {
      try {
        await watchAll(
          () => this.refetchSoon(), // registered: a read from now on misses no change
          (event) => {
            if (DEVICE_KINDS.has(dig(event, "object", "kind"))) this.refetchSoon();
          },
          signal,
        );
        wait = 250;
      } catch (error) {
        if (signal.aborted) return;
        // refused: class changes still read the devices again
        if (error instanceof ApiError && (error.status === 401 || error.status === 403)) return;
        await pause(wait);
        wait = Math.min(wait * 2, 5000);
      }
    }
  }
}

export const VIEWS = {
  nodes: { kinds: ["nodes", "pods"], create: (ctx) => new RenderedView(ctx, renderNodes) },
  instances: { kinds: ["instances"], create: (ctx) => new InstancesView(ctx) },
  brokers: {
    kinds: ["configurations", "pods", "services"],
    create: (ctx) => new RenderedView(ctx, renderBrokers),
  },
  classes: {
    kinds: ["resourceclasses", "deviceclasses", "resourceclaims"],
    create: (ctx) => new ClassesView(ctx),
  },
  fleet: { kinds: ["clusters", "deploymentintentgroups"], create: (ctx) => new RenderedView(ctx, renderFleet) },
};
