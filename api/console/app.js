// The console's pages, one render function each, picked by the URL's hash
// (#/, #/topics, #/topic/NAME, #/browse/NAME, #/groups, #/group/NAME,
// #/produce). Every figure comes from tidelog's HTTP API (docs/CONSOLE.md
// says which route each page reads). When a page has rendered,
// <body data-page="..."> names it, which the browser tests wait for.

import * as api from "./api.js";
import { lineChart, gauge } from "./plot.js";
import {
  h, table, bytes, percent, rate, date, fromBase64, toBase64, utf8, payloadView, notice,
} from "./view.js";

const main = document.getElementById("main");
const REFRESH_MS = 4000;
let generation = 0;
let refreshTimer = null;

/** Replaces the page's content, unless the operator navigated away. */
function show(gen, ...nodes) {
  if (gen !== generation) return false;
  main.replaceChildren(...nodes.filter((n) => n !== null && n !== undefined));
  return true;
}

function done(gen, page) {
  if (gen === generation) document.body.dataset.page = page;
}

function errorText(e) {
  return e instanceof api.ApiError ? e.message : `request failed: ${e}`;
}

/** A form's submit handler that shows its outcome in `out`. */
function action(out, work) {
  return async (event) => {
    event.preventDefault();
    out.replaceChildren(notice("working…"));
    try {
      const result = await work();
      if (result instanceof Node) {
        out.replaceChildren(result);
      } else {
        out.replaceChildren(notice(result || "done", "ok"));
      }
    } catch (e) {
      out.replaceChildren(notice(errorText(e), "error"));
    }
  };
}

function field(label, input) {
  return h("label", null, h("span", null, label), input);
}

function select(attrs, options, selected) {
  return h("select", attrs, options.map(([value, text]) =>
    h("option", { value, selected: String(value) === String(selected) }, text)));
}

async function userTopics() {
  return api.get("/topics");
}

// ---------------------------------------------------------------- overview

async function overview(gen) {
  let ready;
  try {
    await api.get("/status/ready");
    ready = h("span", { id: "ready", class: "good" }, "ready");
  } catch (e) {
    ready = h("span", { id: "ready", class: "bad" }, errorText(e));
  }
  const [stats, history, cluster] = await Promise.all([
    api.v3("GET", "/stats"),
    api.v3("GET", "/stats/history"),
    // The cluster's view is one more figure: a principal that may not
    // describe the cluster still sees the rest.
    api.get("/v1/cluster").catch((e) => ({ error: errorText(e) })),
  ]);
  const tiers = [
    { value: history.disk_max_used_ratio, label: `${percent(history.disk_max_used_ratio)} expire`, cls: "t1" },
    { value: history.disk_force_clean_ratio, label: `${percent(history.disk_force_clean_ratio)} force`, cls: "t2" },
    { value: history.disk_full_ratio, label: `${percent(history.disk_full_ratio)} full`, cls: "t3" },
  ];
  const samples = history.samples;
  const at = (key) => samples.map((s) => [s.timestamp_ms, s[key]]);
  const last = samples[samples.length - 1] || {};
  const figures = [
    ["Readiness", ready],
    ["Cluster", clusterSummary(cluster)],
    ["Disk used", `${percent(stats.disk_used_ratio)}${stats.disk_full ? " (full: produce refused)" : ""}`],
    ["CommitLog segments", stats.commitlog_segments],
    ["CommitLog bytes", `${bytes(stats.commitlog_min_offset)} – ${bytes(stats.commitlog_max_offset)}`],
    ["Dispatch lag", `${bytes(stats.dispatch_lag_bytes)}${stats.dispatch_stalled ? " (stalled)" : ""}`],
    ["Produce", `${rate(last.produce_records_per_sec)} records, ${bytes(last.produce_bytes_per_sec)}/s`],
    ["Fetch", `${rate(last.fetch_records_per_sec)} records, ${bytes(last.fetch_bytes_per_sec)}/s`],
    ["Topics", stats.topics],
    ["Partitions", stats.partitions],
    ["Consumer groups", stats.consumer_groups],
    ["Retention", `${stats.retention_segments_deleted} segments deleted, ${bytes(stats.retention_bytes_freed)} freed`],
  ];
  const shown = show(gen,
    h("h1", null, "Overview"),
    h("dl", { id: "overview-figures", class: "figures" },
      figures.map(([name, value]) => [h("dt", null, name), h("dd", null, value)])),
    clusterSection(cluster),
    h("section", { class: "charts" },
      h("figure", null, h("figcaption", null, "Disk used against the retention tiers"),
        gauge({
          title: "disk used now",
          ratio: stats.disk_used_ratio,
          tiers: tiers.map((t) => ({ ...t, label: percent(t.value) })),
        }),
        lineChart({
          title: "disk used over the last minutes",
          series: [{ name: "disk used", points: at("disk_used_ratio") }],
          lines: tiers, yMax: 1, format: percent,
        })),
      h("figure", null, h("figcaption", null, "Produce and fetch, records per second"),
        lineChart({
          title: "produce and fetch rates",
          series: [
            { name: "produce", points: at("produce_records_per_sec") },
            { name: "fetch", points: at("fetch_records_per_sec") },
          ],
          format: (v) => v.toFixed(0),
        })),
      h("figure", null, h("figcaption", null, "Dispatch lag (bytes not yet indexed)"),
        lineChart({
          title: "dispatch lag",
          series: [{ name: "dispatch lag", points: at("dispatch_lag_bytes") }],
          format: bytes,
        }))),
    h("p", { class: "muted" },
      `${samples.length} samples, one every ${history.interval_ms / 1000} s; refreshed every ${REFRESH_MS / 1000} s.`));
  if (shown) {
    done(gen, "overview");
    refreshTimer = setTimeout(() => {
      if (gen === generation) overview(gen).catch((e) => show(gen, notice(errorText(e), "error")));
    }, REFRESH_MS);
  }
}

/** Whether `GET /v1/cluster` answered for a cluster (a single node is
 * epoch 0, node 0, the one master: docs/API.md "Cluster"). */
function inCluster(cluster) {
  return !cluster.error && (cluster.epoch > 0 || cluster.nodes.length > 1);
}

function clusterSummary(cluster) {
  if (cluster.error) return h("span", { id: "cluster-summary", class: "bad" }, cluster.error);
  if (!inCluster(cluster)) return h("span", { id: "cluster-summary" }, "single node");
  const inSync = cluster.nodes.filter((n) => n.in_sync).length;
  const master = cluster.master === null ? "no master known" : `master node ${cluster.master}`;
  return h("span", { id: "cluster-summary", class: cluster.master === null ? "bad" : null },
    `epoch ${cluster.epoch}, ${master}, ${inSync} of ${cluster.nodes.length} nodes in sync; this is node ${cluster.node_id}`);
}

/** The nodes of a cluster, as the answering node sees them; nothing for
 * a single node. */
function clusterSection(cluster) {
  if (!inCluster(cluster)) return null;
  const rows = cluster.nodes.map((n) => [
    n.node_id === cluster.node_id ? `${n.node_id} (this node)` : String(n.node_id),
    n.role,
    n.http,
    n.kafka ?? "–",
    h("td", { class: n.in_sync ? "good" : "bad" }, n.in_sync ? "yes" : "no"),
    h("td", { class: "num" }, bytes(n.lag_bytes)),
  ]);
  return h("section", { id: "cluster" },
    h("h2", null, `Cluster, epoch ${cluster.epoch}`),
    table(["Node", "Role", "HTTP", "Kafka", "In sync", "Lag"], rows, { id: "cluster-nodes" }));
}

// ---------------------------------------------------------------- topics

async function topicDetail(name) {
  return api.v3("GET", `/topics/${api.seg(name)}`);
}

async function compaction(name) {
  return api.v3("GET", `/topics/${api.seg(name)}/compaction`);
}

function compacts(policy) {
  return policy === "compact" || policy === "compact,delete";
}

function compactionSummary(status) {
  if (!status) return ["–", "–"];
  const states = [...new Set(status.partitions.map((p) => p.state))].join(", ");
  const dirty = Math.max(0, ...status.partitions.map((p) => p.dirty_ratio));
  return [states, percent(dirty)];
}

async function topics(gen) {
  const list = await api.v3("GET", "/topics");
  const details = await Promise.all(list.data.map(async (t) => {
    const detail = await topicDetail(t.topic_name);
    const status = compacts(detail.cleanup_policy) ? await compaction(t.topic_name) : null;
    return { detail, status };
  }));
  const rows = details.map(({ detail, status }) => {
    const offsets = detail.partition_usage
      .slice(0, 8)
      .map((p) => `${p.partition}: ${p.beginning_offset}–${p.end_offset}`)
      .join(", ") + (detail.partition_usage.length > 8 ? ", …" : "");
    const [state, dirty] = compactionSummary(status);
    return [
      h("td", null, h("a", { href: `#/topic/${api.seg(detail.topic_name)}` }, detail.topic_name),
        detail.is_internal ? h("span", { class: "tag" }, "internal") : null),
      detail.cleanup_policy,
      h("td", { class: "num" }, detail.partitions_count),
      offsets,
      h("td", { class: "num" }, detail.records),
      h("td", { class: "num" }, `${detail.bytes_on_disk_estimated ? "≈ " : ""}${bytes(detail.bytes_on_disk)}`),
      state,
      h("td", { class: "num" }, dirty),
    ];
  });
  const out = h("div", { id: "create-result" });
  const name = h("input", { id: "create-name", required: true, placeholder: "orders" });
  const partitions = h("input", { id: "create-partitions", type: "number", min: 1, max: 10000, value: 1 });
  const policy = select({ id: "create-policy" },
    [["delete", "delete"], ["compact", "compact"], ["compact,delete", "compact,delete"]], "delete");
  const form = h("form", { id: "create-form", class: "inline" },
    field("Name", name), field("Partitions", partitions), field("cleanup.policy", policy),
    h("button", { type: "submit", id: "create-submit" }, "Create topic"), out);
  form.addEventListener("submit", action(out, async () => {
    await api.v3("POST", "/topics", {
      body: {
        topic_name: name.value,
        partitions_count: Number(partitions.value),
        configs: [{ name: "cleanup.policy", value: policy.value }],
      },
    });
    setTimeout(() => route(), 0);
    return `created ${name.value}`;
  }));
  if (show(gen,
    h("h1", null, "Topics"),
    table(["Topic", "Policy", "Partitions", "Offsets (partition: beginning–end)", "Records", "On disk", "Compaction", "Dirty ratio"],
      rows, { id: "topics-table" }),
    h("h2", null, "Create a topic"), form)) {
    done(gen, "topics");
  }
}

async function topicPage(gen, name) {
  const detail = await topicDetail(name);
  const [configs, status] = await Promise.all([
    api.v3("GET", `/topics/${api.seg(name)}/configs`),
    compacts(detail.cleanup_policy) ? compaction(name) : Promise.resolve(null),
  ]);
  const path = `/topics/${api.seg(name)}`;
  const partitionRows = detail.partition_usage.map((p) => {
    const s = status && status.partitions.find((c) => c.partition === p.partition);
    return [
      h("td", { class: "num" }, p.partition),
      h("td", { class: "num" }, p.beginning_offset),
      h("td", { class: "num" }, p.end_offset),
      h("td", { class: "num" }, p.records),
      h("td", { class: "num" }, bytes(p.bytes_on_disk)),
      s ? s.state : "–",
      s ? percent(s.dirty_ratio) : "–",
      s ? String(s.runs) : "–",
      h("td", null, h("a", { href: `#/browse/${api.seg(name)}/${p.partition}` }, "messages")),
    ];
  });
  const configRows = configs.data.map((c) => {
    const out = h("span", { class: "config-result" });
    const input = h("input", { value: c.value, "data-config": c.name, "aria-label": c.name });
    const set = h("button", { type: "submit", "data-set": c.name }, "Set");
    const form = h("form", { class: "inline" }, input, set, out);
    form.addEventListener("submit", action(out, async () => {
      await api.v3("PUT", `${path}/configs/${api.seg(c.name)}`, { body: { value: input.value } });
      setTimeout(() => route(), 300);
      return "saved";
    }));
    const reset = c.is_default ? null : h("button", {
      type: "button",
      "data-reset": c.name,
      onclick: action(out, async () => {
        await api.v3("POST", `${path}/configs:alter`, { body: { data: [{ name: c.name, operation: "DELETE" }] } });
        setTimeout(() => route(), 300);
        return "back to the default";
      }),
    }, "Reset to default");
    return [c.name, h("td", null, form), c.is_default ? "default" : "overridden", c.default, h("td", null, reset)];
  });
  const sections = [
    h("h1", null, `Topic ${name}`),
    h("dl", { class: "figures", id: "topic-figures" },
      h("dt", null, "Policy"), h("dd", null, detail.cleanup_policy),
      h("dt", null, "Partitions"), h("dd", null, detail.partitions_count),
      h("dt", null, "Records"), h("dd", null, detail.records),
      h("dt", null, "On disk"), h("dd", null,
        `${detail.bytes_on_disk_estimated ? "≈ " : ""}${bytes(detail.bytes_on_disk)}`)),
    h("p", null, h("a", { href: `#/browse/${api.seg(name)}` }, "Browse messages")),
    h("h2", null, "Partitions"),
    table(["Partition", "Beginning", "End", "Records", "On disk", "Compaction", "Dirty ratio", "Passes", ""],
      partitionRows, { id: "partitions-table" }),
    h("h2", null, "Configs"),
    table(["Name", "Value", "", "Default", ""], configRows, { id: "configs-table" }),
  ];
  if (status) {
    const out = h("div", { id: "compact-result" });
    const button = h("button", {
      id: "compact",
      onclick: action(out, async () => {
        const answer = await api.v3("POST", `${path}/compaction`, { body: { wait: true, roll_active: true } });
        return h("div", null,
          notice(`${answer.task_id}: ${answer.timed_out ? "timed out, still running" : "finished"}`, "ok"),
          table(["Partition", "Completed", "State", "Records kept", "Records removed", "Bytes read", "Bytes written", "ms"],
            answer.partitions.map((p) => [
              p.partition, String(p.completed), p.state,
              p.last_run ? p.last_run.records_kept : "–",
              p.last_run ? p.last_run.records_removed : "–",
              p.last_run ? bytes(p.last_run.bytes_read) : "–",
              p.last_run ? bytes(p.last_run.bytes_written) : "–",
              p.last_run ? p.last_run.duration_ms : "–",
            ]), { id: "compact-table" }));
      }),
    }, "Compact now");
    sections.push(h("h2", null, "Compaction"),
      h("p", null, button, " rolls the active segments and waits for a pass over every partition."), out);
  }
  if (!detail.is_internal) {
    const out = h("div", { id: "delete-result" });
    const confirm = h("input", { id: "delete-confirm", placeholder: "type the topic's name" });
    const form = h("form", { class: "inline danger" }, field("Delete this topic", confirm),
      h("button", { type: "submit", id: "delete" }, "Delete"), out);
    form.addEventListener("submit", action(out, async () => {
      if (confirm.value !== name) throw new Error("type the topic's name to confirm");
      await api.v3("DELETE", `/topics/${api.seg(name)}`);
      setTimeout(() => { location.hash = "#/topics"; }, 0);
      return `deleted ${name}`;
    }));
    sections.push(h("h2", null, "Delete"), form);
  }
  if (show(gen, ...sections)) done(gen, "topic");
}

// ---------------------------------------------------------------- messages

function recordsTable(records) {
  return table(["Offset", "Partition", "Timestamp", "Key", "Value", "Headers", "Physical offset"],
    records.map((r) => [
      h("td", { class: "num" }, r.offset),
      h("td", { class: "num" }, r.partition),
      date(r.timestamp),
      h("td", null, payloadView(fromBase64(r.key))),
      h("td", null, payloadView(fromBase64(r.value))),
      h("td", null, (r.headers || []).map((hd) =>
        h("div", { class: "header" }, h("b", null, hd.name), payloadView(fromBase64(hd.value))))),
      r.physical_offset === undefined ? "–" : h("td", { class: "num" },
        h("a", { href: `#/browse/@${r.physical_offset}` }, r.physical_offset)),
    ]), { id: "records-table" });
}

/** Records of the browse form's choice (app.js's header: newest first ends at the anchor). */
async function loadRecords({ topic, partition, mode, from, order, count }) {
  const offsets = await api.offsets(topic, partition);
  let anchor;
  if (mode === "timestamp") {
    const ms = Number.isNaN(Number(from)) ? Date.parse(from) : Number(from);
    if (Number.isNaN(ms)) throw new Error(`${from} is not a date or a millisecond timestamp`);
    anchor = (await api.offsets(topic, partition, ms)).offset;
  } else if (from === "") {
    anchor = order === "newest" ? offsets.end_offset - 1 : offsets.beginning_offset;
  } else {
    anchor = Number(from);
  }
  if (order === "oldest") {
    const start = Math.max(anchor, offsets.beginning_offset);
    return { offsets, records: await api.fetchRecords(topic, partition, start, count) };
  }
  // Newest first: the `count` records ending at the anchor, reversed.
  const last = Math.min(anchor, offsets.end_offset - 1);
  if (last < offsets.beginning_offset) return { offsets, records: [] };
  const start = Math.max(offsets.beginning_offset, last - count + 1);
  const records = (await api.fetchRecords(topic, partition, start, count)).filter((r) => r.offset <= last);
  return { offsets, records: records.reverse() };
}

async function browse(gen, topicArg, partitionArg) {
  const names = await userTopics();
  const out = h("div", { id: "browse-result" });
  const physicalOut = h("div", { id: "physical-result" });
  const searchOut = h("div", { id: "search-result" });
  const topic = select({ id: "browse-topic" }, names.map((n) => [n, n]), topicArg);
  const partition = h("input", { id: "browse-partition", type: "number", min: 0, value: partitionArg || 0 });
  const mode = select({ id: "browse-mode" }, [["offset", "from offset"], ["timestamp", "from timestamp"]], "offset");
  const from = h("input", { id: "browse-from", placeholder: "offset, or a date / ms timestamp" });
  const order = select({ id: "browse-order" }, [["oldest", "oldest first"], ["newest", "newest first"]], "oldest");
  const count = h("input", { id: "browse-count", type: "number", min: 1, max: 1000, value: 50 });
  const form = h("form", { id: "browse-form", class: "inline" },
    field("Topic", topic), field("Partition", partition), field("Start", mode), field("At", from),
    field("Order", order), field("Records", count), h("button", { type: "submit", id: "browse-load" }, "Load"));
  const load = action(out, async () => {
    const { offsets, records } = await loadRecords({
      topic: topic.value, partition: Number(partition.value), mode: mode.value,
      from: from.value.trim(), order: order.value, count: Number(count.value),
    });
    return h("div", null,
      notice(`partition ${partition.value}: offsets ${offsets.beginning_offset}–${offsets.end_offset}, ${records.length} records shown`),
      recordsTable(records));
  });
  form.addEventListener("submit", load);

  const key = h("input", { id: "search-key", placeholder: "the key's exact bytes as UTF-8" });
  const searchForm = h("form", { id: "search-form", class: "inline" },
    field("Key", key), h("button", { type: "submit", id: "search" }, "Search by key"));
  searchForm.addEventListener("submit", action(searchOut, async () => {
    const records = await api.queryByKey(topic.value, toBase64(utf8(key.value)), 100);
    return h("div", null, notice(`${records.length} records with this key, newest first`), recordsTable(records));
  }));

  const position = h("input", { id: "physical-offset", type: "number", min: 0 });
  const physicalForm = h("form", { id: "physical-form", class: "inline" },
    field("Physical offset", position), h("button", { type: "submit", id: "physical" }, "Open record"));
  const openPhysical = action(physicalOut, async () => {
    const record = await api.readPhysical(Number(position.value));
    return h("div", null, notice(`topic ${record.topic}`), recordsTable([record]));
  });
  physicalForm.addEventListener("submit", openPhysical);

  const shown = show(gen,
    h("h1", null, "Messages"),
    h("p", { class: "muted" }, "Keys, values and header values are shown as JSON when they are, as text when UTF-8, else as hex and UTF-8."),
    form, out,
    h("h2", null, "Search by key (IndexFile)"),
    h("p", { class: "muted" }, "A key produced in the json format is its JSON text: a string key includes its quotes."),
    searchForm, searchOut,
    h("h2", null, "Open one record by physical offset"), physicalForm, physicalOut);
  if (!shown) return;
  if (topicArg && topicArg.startsWith("@")) {
    // #/browse/@N: a link from a record's physical offset.
    position.value = topicArg.slice(1);
    await openPhysical(new Event("submit"));
  } else if (topicArg) {
    await load(new Event("submit"));
  }
  done(gen, "browse");
}

// ---------------------------------------------------------------- groups

async function groups(gen) {
  const list = await api.get("/consumer-groups");
  const rows = list.groups.map((g) => [
    h("td", null, h("a", { href: `#/group/${api.seg(g.group)}` }, g.group)),
    g.state, g.protocol || "–", h("td", { class: "num" }, g.members),
  ]);
  if (show(gen, h("h1", null, "Consumer groups"),
    rows.length ? table(["Group", "State", "Protocol", "Members"], rows, { id: "groups-table" })
      : notice("no consumer groups yet"))) {
    done(gen, "groups");
  }
}

async function groupPage(gen, name) {
  const group = await api.get(`/consumer-groups/${api.seg(name)}`);
  const members = table(["Member", "Client", "Host", "Assignments"],
    group.members.map((m) => [
      m.member_id, m.client_id, m.host,
      m.assignments.map((a) => `${a.topic}/${a.partition}`).join(", ") || "–",
    ]), { id: "members-table" });
  const offsets = table(["Topic", "Partition", "Committed", "End", "Lag"],
    group.offsets.map((o) => [
      o.topic, h("td", { class: "num" }, o.partition), h("td", { class: "num" }, o.offset),
      h("td", { class: "num" }, o.end_offset ?? "–"), h("td", { class: "num lag" }, o.lag ?? "–"),
    ]), { id: "offsets-table" });
  const out = h("div", { id: "reset-result" });
  const topicsOfGroup = [...new Set(group.offsets.map((o) => o.topic))];
  const topic = select({ id: "reset-topic" }, [["", "every topic of the group"], ...topicsOfGroup.map((t) => [t, t])], "");
  const to = select({ id: "reset-to" },
    [["beginning", "beginning"], ["end", "end"], ["offset", "an offset"], ["timestamp", "a timestamp (ms or date)"]], "beginning");
  const value = h("input", { id: "reset-value", placeholder: "offset or time" });
  const hasMembers = group.members.length > 0;
  const form = h("form", { id: "reset-form", class: "inline" },
    field("Topic", topic), field("To", to), field("Value", value),
    h("button", { type: "submit", id: "reset", disabled: hasMembers }, "Reset offsets"), out);
  form.addEventListener("submit", action(out, async () => {
    let target = to.value;
    if (target === "offset") target = { offset: Number(value.value) };
    if (target === "timestamp") {
      const ms = Number.isNaN(Number(value.value)) ? Date.parse(value.value) : Number(value.value);
      target = { timestamp: ms };
    }
    const body = { to: target };
    if (topic.value) body.topic = topic.value;
    const answer = await api.call("POST", `/consumer-groups/${api.seg(name)}/offsets:reset`, { body });
    setTimeout(() => route(), 500);
    return `reset ${answer.offsets.length} offsets`;
  }));
  if (show(gen,
    h("h1", null, `Consumer group ${name}`),
    h("dl", { class: "figures" },
      h("dt", null, "State"), h("dd", { id: "group-state" }, group.state),
      h("dt", null, "Protocol"), h("dd", null, group.protocol || "–"),
      h("dt", null, "Generation"), h("dd", null, group.generation)),
    h("h2", null, "Members"), group.members.length ? members : notice("no members"),
    h("h2", null, "Committed offsets and lag"), offsets,
    h("h2", null, "Reset offsets"),
    hasMembers ? notice("The group has members: stop its consumers before resetting its offsets.", "error") : null,
    form)) {
    done(gen, "group");
  }
}

// ---------------------------------------------------------------- produce

async function producePage(gen) {
  const names = await userTopics();
  const out = h("div", { id: "produce-result" });
  const topic = select({ id: "produce-topic" }, names.map((n) => [n, n]), names[0]);
  const partition = h("input", { id: "produce-partition", placeholder: "by key, or round-robin" });
  const key = h("input", { id: "produce-key", placeholder: "none" });
  const value = h("textarea", { id: "produce-value", rows: 5, placeholder: "text or JSON, sent as these bytes" });
  const headers = h("textarea", { id: "produce-headers", rows: 3, placeholder: "name: value, one a line" });
  const form = h("form", { id: "produce-form", class: "stacked" },
    field("Topic", topic), field("Partition", partition), field("Key", key),
    field("Value", value), field("Headers", headers),
    h("button", { type: "submit", id: "produce" }, "Produce"), out);
  form.addEventListener("submit", action(out, async () => {
    const record = { value: toBase64(utf8(value.value)) };
    if (key.value !== "") record.key = toBase64(utf8(key.value));
    record.headers = headers.value.split("\n").filter((l) => l.trim()).map((line) => {
      const at = line.indexOf(":");
      if (at < 1) throw new Error(`header line ${JSON.stringify(line)} is not "name: value"`);
      return { name: line.slice(0, at).trim(), value: toBase64(utf8(line.slice(at + 1).trim())) };
    });
    const p = partition.value.trim() === "" ? null : Number(partition.value);
    const answer = await api.produce(topic.value, p, record);
    const written = answer.offsets[0];
    if (written.error_code) throw new Error(`${written.error_code}: ${written.error}`);
    return h("p", { class: "notice ok", id: "produced" },
      `written to partition ${written.partition} at offset ${written.offset} `,
      h("a", { href: `#/browse/${api.seg(topic.value)}/${written.partition}` }, "see it"));
  }));
  if (show(gen, h("h1", null, "Produce a record"), form)) done(gen, "produce");
}

// ---------------------------------------------------------------- routing

const PAGES = {
  "": overview,
  topics,
  topic: topicPage,
  browse,
  groups,
  group: groupPage,
  produce: producePage,
};

async function route() {
  generation += 1;
  const gen = generation;
  clearTimeout(refreshTimer);
  delete document.body.dataset.page;
  const parts = location.hash.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
  const page = PAGES[parts[0]] || overview;
  for (const link of document.querySelectorAll("nav a")) {
    link.classList.toggle("current", link.getAttribute("href") === `#/${parts[0]}`);
  }
  main.replaceChildren(notice("loading…"));
  try {
    await page(gen, ...parts.slice(1));
  } catch (e) {
    if (show(gen, notice(errorText(e), "error"))) done(gen, "error");
  }
}

function tokenForm() {
  const input = document.getElementById("token");
  const state = document.getElementById("token-state");
  const refresh = () => { state.textContent = api.token() ? "token set (this tab)" : ""; };
  document.getElementById("token-form").addEventListener("submit", (event) => {
    event.preventDefault();
    api.setToken(input.value);
    input.value = "";
    refresh();
  });
  document.getElementById("token-clear").addEventListener("click", () => {
    api.setToken("");
    refresh();
  });
  refresh();
}

// The user this tab logs in as (HTTP Basic): asked for when the server
// answers 401, checked by the page it then shows again.
function loginForm() {
  const form = document.getElementById("login-form");
  const name = document.getElementById("login-user");
  const password = document.getElementById("login-password");
  const state = document.getElementById("login-state");
  const refresh = () => {
    state.textContent = api.user() ? `logged in as ${api.user()}` : "";
  };
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    api.setLogin(name.value, password.value);
    name.value = "";
    password.value = "";
    form.classList.remove("required");
    refresh();
    route();
  });
  document.getElementById("login-clear").addEventListener("click", () => {
    api.setLogin("");
    refresh();
    route();
  });
  window.addEventListener("tidelog:login-required", () => {
    form.classList.add("required");
    state.textContent = api.user() ? "login refused: check the user and password" : "this server needs a login";
  });
  refresh();
}

loginForm();
tokenForm();
window.addEventListener("hashchange", route);
route();
