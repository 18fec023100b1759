// Line charts in SVG, drawn from numbers only (no text is parsed as
// markup): the rates, the dispatch lag and the disk use against its tiers.

const SVG = "http://www.w3.org/2000/svg";
const WIDTH = 560;
const HEIGHT = 180;
const PAD = { left: 56, right: 12, top: 12, bottom: 24 };

function svg(tag, attrs, text) {
  const element = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attrs)) element.setAttribute(name, String(value));
  if (text !== undefined) element.textContent = text;
  return element;
}

/**
 * `series`: [{name, cls, points: [[timestampMs, value|null], ...]}];
 * `lines`: horizontal marks [{value, label, cls}]; `yMax`: a fixed top
 * (else the data's); `format`: a value's label.
 */
export function lineChart({ title, series, lines = [], yMax, format = String }) {
  const root = svg("svg", {
    viewBox: `0 0 ${WIDTH} ${HEIGHT}`, class: "chart", role: "img", "aria-label": title,
  });
  root.append(svg("title", {}, title));
  const all = series.flatMap((s) => s.points).filter((p) => p[1] !== null);
  const times = all.map((p) => p[0]);
  const t0 = times.length ? Math.min(...times) : 0;
  const t1 = times.length ? Math.max(...times) : 1;
  const top = yMax ?? Math.max(1e-9, ...all.map((p) => p[1]), ...lines.map((l) => l.value));
  const x = (t) => PAD.left + ((t - t0) / Math.max(1, t1 - t0)) * (WIDTH - PAD.left - PAD.right);
  const y = (v) => HEIGHT - PAD.bottom - (v / top) * (HEIGHT - PAD.top - PAD.bottom);
  root.append(svg("line", { x1: PAD.left, y1: y(0), x2: WIDTH - PAD.right, y2: y(0), class: "axis" }));
  root.append(svg("line", { x1: PAD.left, y1: PAD.top, x2: PAD.left, y2: y(0), class: "axis" }));
  root.append(svg("text", { x: PAD.left - 4, y: PAD.top + 8, class: "label end" }, format(top)));
  root.append(svg("text", { x: PAD.left - 4, y: y(0), class: "label end" }, format(0)));
  if (times.length) {
    const minutes = ((t1 - t0) / 60000).toFixed(1);
    root.append(svg("text", { x: PAD.left, y: HEIGHT - 6, class: "label" }, `−${minutes} min`));
    root.append(svg("text", { x: WIDTH - PAD.right, y: HEIGHT - 6, class: "label end" }, "now"));
  }
  for (const line of lines) {
    root.append(svg("line", {
      x1: PAD.left, y1: y(line.value), x2: WIDTH - PAD.right, y2: y(line.value), class: `tier ${line.cls || ""}`,
    }));
    root.append(svg("text", { x: WIDTH - PAD.right - 2, y: y(line.value) - 3, class: "label end" }, line.label));
  }
  series.forEach((s, i) => {
    const points = s.points.filter((p) => p[1] !== null);
    if (points.length) {
      const d = points.map((p, j) => `${j ? "L" : "M"}${x(p[0]).toFixed(1)},${y(p[1]).toFixed(1)}`).join(" ");
      root.append(svg("path", { d, class: `series s${i} ${s.cls || ""}` }));
    }
    root.append(svg("text", { x: PAD.left + 6 + i * 150, y: PAD.top + 10, class: `legend s${i}` }, s.name));
  });
  if (!all.length) {
    root.append(svg("text", { x: WIDTH / 2, y: HEIGHT / 2, class: "label middle" }, "no samples yet"));
  }
  return root;
}

/** A horizontal bar of `ratio` with the tier marks. */
export function gauge({ title, ratio, tiers }) {
  const w = WIDTH;
  const hgt = 44;
  const root = svg("svg", { viewBox: `0 0 ${w} ${hgt}`, class: "gauge", role: "img", "aria-label": title });
  root.append(svg("title", {}, title));
  const inner = w - 24;
  root.append(svg("rect", { x: 12, y: 8, width: inner, height: 18, class: "track" }));
  const level = tiers.filter((t) => ratio > t.value).length;
  root.append(svg("rect", {
    x: 12, y: 8, width: Math.max(0, Math.min(1, ratio)) * inner, height: 18, class: `fill level${level}`,
  }));
  for (const t of tiers) {
    const tx = 12 + t.value * inner;
    root.append(svg("line", { x1: tx, y1: 4, x2: tx, y2: 30, class: "tier" }));
    root.append(svg("text", { x: tx, y: 41, class: "label middle" }, t.label));
  }
  return root;
}
