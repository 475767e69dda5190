// Building the page from data that may be hostile (device properties come from devices nobody controls): elements
// by createElement, text by text nodes, attributes by setAttribute. Never innerHTML.

// el("td", {class: "x", "data-slot": name}, "text", child, ...): strings become text nodes; null/false skipped.
export function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  if (attrs) {
    for (const [name, value] of Object.entries(attrs)) {
      if (value === null || value === undefined || value === false) continue;
      if (name.startsWith("on") && typeof value === "function") node.addEventListener(name.slice(2), value);
      else node.setAttribute(name, value === true ? "" : String(value));
    }
  }
  append(node, children);
  return node;
}

export function append(node, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

export function clear(node) {
  node.replaceChildren();
  return node;
}

export function table(headers, rows, attrs) {
  return el(
    "table",
    attrs,
    el("thead", null, el("tr", null, headers.map((header) => el("th", { scope: "col" }, header)))),
    el("tbody", null, rows),
  );
}

export function section(title, attrs, ...children) {
  return el("section", attrs, el("h2", null, title), children);
}

export function empty(text) {
  return el("p", { class: "empty" }, text);
}
