// DOM building and formatting. Everything shown goes through text nodes
// (textContent, createTextNode) or attributes set one by one: no HTML is
// ever parsed from data, so a record's key or value cannot inject markup.

/**
 * An element: `h("td", {class: "num"}, "12")`. Attributes are set with
 * setAttribute, `on*` keys become listeners, children are nodes or text.
 */
export function h(tag, attrs, ...children) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on")) {
      element.addEventListener(name.slice(2), value);
    } else {
      element.setAttribute(name, value === true ? "" : String(value));
    }
  }
  append(element, children);
  return element;
}

function append(element, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    element.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** A table from a header row and rows of cells. */
export function table(headers, rows, attrs) {
  return h("table", attrs,
    h("thead", null, h("tr", null, headers.map((c) => h("th", null, c)))),
    h("tbody", null, rows.map((row) => h("tr", null, row.map((cell) =>
      cell instanceof Node && cell.tagName === "TD" ? cell : h("td", null, cell))))));
}

export function bytes(n) {
  if (n === null || n === undefined) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let value = Number(n);
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${unit === 0 ? value : value.toFixed(1)} ${units[unit]}`;
}

export function percent(ratio) {
  return ratio === null || ratio === undefined ? "–" : `${(ratio * 100).toFixed(1)} %`;
}

export function rate(n) {
  return n === null || n === undefined ? "–" : `${n >= 100 ? n.toFixed(0) : n.toFixed(1)}/s`;
}

/** A millisecond timestamp as an ISO date, the number beside it. */
export function date(ms) {
  const d = new Date(Number(ms));
  return Number.isNaN(d.getTime()) ? String(ms) : `${d.toISOString()} (${ms})`;
}

/** Base64 to bytes (null stays null). */
export function fromBase64(text) {
  if (text === null || text === undefined) return null;
  const raw = atob(text);
  const out = new Uint8Array(raw.length);
  for (let i = 0; i < raw.length; i++) out[i] = raw.charCodeAt(i);
  return out;
}

export function toBase64(bytesArray) {
  let raw = "";
  for (const b of bytesArray) raw += String.fromCharCode(b);
  return btoa(raw);
}

export function utf8(text) {
  return new TextEncoder().encode(text);
}

/**
 * How a key, value or header value is shown: `{kind: "json", text}` when
 * the bytes are UTF-8 JSON (pretty-printed), `{kind: "text", text}` when
 * they are UTF-8 but not JSON, otherwise `{kind: "binary", hex, text}` with
 * the hex dump and the bytes read as UTF-8 with replacement characters.
 */
export function decodePayload(payload) {
  if (payload === null) return { kind: "null", text: "null" };
  let text;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(payload);
  } catch {
    return {
      kind: "binary",
      hex: Array.from(payload, (b) => b.toString(16).padStart(2, "0")).join(" "),
      text: new TextDecoder("utf-8").decode(payload),
    };
  }
  try {
    return { kind: "json", text: JSON.stringify(JSON.parse(text), null, 2) };
  } catch {
    return { kind: "text", text };
  }
}

/** A decoded payload as a cell's content. */
export function payloadView(payload) {
  const shown = decodePayload(payload);
  if (shown.kind === "binary") {
    return h("div", { class: "payload binary" },
      h("span", { class: "tag" }, "hex"), h("pre", null, shown.hex),
      h("span", { class: "tag" }, "utf-8"), h("pre", null, shown.text));
  }
  return h("div", { class: `payload ${shown.kind}` },
    h("span", { class: "tag" }, shown.kind), h("pre", null, shown.text));
}

/** A message line: an error in red, or a note. */
export function notice(text, kind) {
  return h("p", { class: `notice ${kind || ""}`, role: kind === "error" ? "alert" : "status" }, text);
}
