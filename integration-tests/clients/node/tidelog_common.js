// Shared by the Node client scripts: talk to a running tidelog over HTTP
// as docs/API.md describes (Node's own fetch), bounded waits, and fail
// loudly: a script exits 0 only when every check passed, otherwise 1 with
// what was expected and what came back.
'use strict';

// Each wait and each HTTP request is bounded; the Rust test bounds the
// whole script too.
const DEADLINE_MS = 60000;
const REQUEST_TIMEOUT_MS = 30000;
const BINARY = 'application/vnd.kafka.binary.v2+json';

class Mismatch extends Error {}

function check(condition, message) {
  if (!condition) throw new Mismatch(message);
}

// Buffers (or nulls) with the same bytes.
function sameBytes(a, b) {
  if (a === null || a === undefined || b === null || b === undefined) {
    return (a === null || a === undefined) && (b === null || b === undefined);
  }
  return Buffer.compare(Buffer.from(a), Buffer.from(b)) === 0;
}

async function waitFor(what, condition, deadlineMs = DEADLINE_MS) {
  const deadline = Date.now() + deadlineMs;
  while (!(await condition())) {
    check(Date.now() < deadline, `timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

async function request(method, url, body, headers = {}) {
  const response = await fetch(url, {
    method,
    headers: body === undefined ? headers : { 'Content-Type': 'application/json', ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
  });
  const text = await response.text();
  return { status: response.status, text, json: () => JSON.parse(text) };
}

function expectStatus(response, status, what) {
  check(response.status === status, `${what}: expected HTTP ${status}, got ${response.status}: ${response.text}`);
}

async function createTopic(baseUrl, topic, partitions) {
  const response = await request('POST', `${baseUrl}/v3/clusters/tidelog/topics`, {
    topic_name: topic,
    partitions_count: partitions,
  });
  expectStatus(response, 201, `create topic ${topic}`);
}

async function produceBinary(baseUrl, topic, partition, records) {
  const response = await request('POST', `${baseUrl}/topics/${topic}/partitions/${partition}`, { records }, {
    'Content-Type': BINARY,
  });
  expectStatus(response, 200, `produce to ${topic}`);
}

// `count` records of a partition from offset 0 with the stateless fetch
// (binary embedded format), page by page.
async function fetchAll(baseUrl, topic, partition, count) {
  const records = [];
  let offset = 0;
  await waitFor(`${count} records of ${topic}/${partition} over HTTP`, async () => {
    const response = await request(
      'GET',
      `${baseUrl}/topics/${topic}/partitions/${partition}/records?offset=${offset}&max_records=100&timeout=1000`,
      undefined,
      { Accept: BINARY },
    );
    expectStatus(response, 200, `fetch ${topic}/${partition} at ${offset}`);
    const page = response.json();
    records.push(...page);
    if (page.length) offset = page[page.length - 1].offset + 1;
    return records.length >= count;
  });
  check(records.length === count, `${topic}/${partition}: ${records.length} records over HTTP, ${count} produced`);
  return records;
}

function main(body) {
  body().then(
    () => process.exit(0),
    (error) => {
      console.error(error instanceof Mismatch ? `MISMATCH: ${error.message}` : error.stack || String(error));
      process.exit(1);
    },
  );
}

module.exports = { BINARY, DEADLINE_MS, check, sameBytes, waitFor, request, expectStatus, createTopic, produceBinary, fetchAll, main };
