// Where a manifest goes, read without a YAML library: a document's top-level `apiVersion` and `kind` and its
// `metadata.name` and `metadata.namespace` in block style (or the same fields of a JSON document). The server parses
// the document itself (server-side apply); if what was read here is wrong, its answer names the field.

function scalar(raw) {
  let value = raw.replace(/\s+#.*$/, "").trim();
  if (value.length >= 2 && (value[0] === '"' || value[0] === "'") && value[value.length - 1] === value[0]) {
    value = value.slice(1, -1);
  }
  return value;
}

// The documents of a text: split on `---` lines; documents of comments only are left out.
export function documents(text) {
  return text
    .split(/^---[ \t]*(?:#.*)?$/m)
    .filter((doc) => doc.split(/\r?\n/).some((line) => line.trim() && !line.trim().startsWith("#")));
}

// {apiVersion, kind, name, namespace} of one document; a field it does not find is undefined.
export function headOf(doc) {
  const trimmed = doc.trim();
  if (trimmed.startsWith("{")) {
    try {
      const obj = JSON.parse(trimmed);
      const meta = obj && typeof obj.metadata === "object" && obj.metadata ? obj.metadata : {};
      return { apiVersion: obj.apiVersion, kind: obj.kind, name: meta.name, namespace: meta.namespace };
    } catch {
      return {};
    }
  }
  const head = {};
  let inMetadata = false;
  let indent = null;
  for (const line of doc.split(/\r?\n/)) {
    if (!line.trim() || line.trim().startsWith("#")) continue;
    const top = /^([A-Za-z_][\w.-]*)[ \t]*:(?:[ \t]+(.*))?$/.exec(line);
    if (top) {
      inMetadata = top[1] === "metadata" && !scalar(top[2] || "");
      indent = null;
      if (top[1] === "apiVersion" || top[1] === "kind") head[top[1]] = scalar(top[2] || "");
      continue;
    }
    if (!inMetadata) continue;
    const nested = /^([ \t]+)([A-Za-z_][\w.-]*)[ \t]*:(?:[ \t]+(.*))?$/.exec(line);
    if (!nested) continue;
    if (indent === null) indent = nested[1].length;
    if (nested[1].length === indent && (nested[2] === "name" || nested[2] === "namespace")) {
      head[nested[2]] = scalar(nested[3] || "");
    }
  }
  return head;
}
