// kafkajs reads a compact topic after its cleaning, as
// ../python/kafka_compacted_read.py does for the Python clients: keyed
// records with repeats and a tombstone produced over Kafka to
// `compacted-kafkajs` (the Rust test's config makes the LogCleaner clean it
// by itself), a bounded wait until HTTP reads one record per key, then a
// consumer from the beginning: exactly the last record of each key at its
// original offset across the gaps, the tombstone a null value.
//
// Usage: node kafkajs_compacted_read.js HTTP_URL KAFKA_ADDR
'use strict';

const { Kafka, Partitioners, logLevel } = require('kafkajs');
const common = require('./tidelog_common');

const [baseUrl, broker] = process.argv.slice(2);
const kafka = new Kafka({ brokers: [broker], clientId: 'kafkajs-compacted', logLevel: logLevel.WARN });
const check = common.check;
const TOPIC = 'compacted-kafkajs';
const KEYS = 8;
const VERSIONS = 6;
const TOMBSTONE_KEY = 'key-3';

// (key, value) in produce order, as kafka_compacted_read.py's records().
function records() {
  const out = [];
  for (let version = 0; version < VERSIONS; version++) {
    for (let k = 0; k < KEYS; k++) {
      const key = `key-${k}`;
      let value = Buffer.from(`${key} version ${version} `.repeat(4));
      if (key === TOMBSTONE_KEY && version === VERSIONS - 1) value = null;
      out.push({ key: Buffer.from(key), value });
    }
  }
  return out;
}

// The partition over HTTP (binary format), or what has arrived of it.
async function httpLog() {
  const out = [];
  let offset = 0;
  for (let page = 0; page < 100; page++) {
    const response = await common.request(
      'GET',
      `${baseUrl}/topics/${TOPIC}/partitions/0/records?offset=${offset}&max_records=1000&timeout=0`,
      undefined,
      { Accept: common.BINARY },
    );
    common.expectStatus(response, 200, `fetch ${TOPIC} at ${offset}`);
    const records = response.json();
    if (!records.length) break;
    const bytes = (text) => (text === null || text === undefined ? null : Buffer.from(text, 'base64'));
    for (const r of records) out.push({ offset: r.offset, key: bytes(r.key), value: bytes(r.value) });
    offset = records[records.length - 1].offset + 1;
  }
  return out;
}

function sameRecords(a, b) {
  return (
    a.length === b.length &&
    a.every((r, i) => r.offset === b[i].offset && common.sameBytes(r.key, b[i].key) && common.sameBytes(r.value, b[i].value))
  );
}

const show = (rs) => JSON.stringify(rs.map((r) => [r.offset, r.key && r.key.toString(), r.value && r.value.length]));

common.main(async () => {
  check(baseUrl && broker, 'usage: kafkajs_compacted_read.js HTTP_URL KAFKA_ADDR');
  const sent = records();
  const producer = kafka.producer({ idempotent: false, createPartitioner: Partitioners.DefaultPartitioner });
  await producer.connect();
  const latest = new Map();
  try {
    for (let start = 0; start < sent.length; start += KEYS) {
      const batch = sent.slice(start, start + KEYS);
      const [meta] = await producer.send({ topic: TOPIC, acks: -1, messages: batch.map((r) => ({ ...r, partition: 0 })) });
      check(meta.errorCode === 0 && Number(meta.baseOffset) === start, `produce answered ${JSON.stringify(meta)}`);
      batch.forEach((r, i) => latest.set(r.key.toString(), { offset: start + i, key: r.key, value: r.value }));
    }
  } finally {
    await producer.disconnect();
  }
  const expected = [...latest.values()].sort((a, b) => a.offset - b.offset);

  // The cleaner runs by itself (backoff, segment.ms): wait for its result.
  let log = [];
  await common.waitFor(`${TOPIC} compacted to one record per key`, async () => {
    log = await httpLog();
    return sameRecords(log, expected);
  });
  console.log(`${TOPIC}: the cleaner left ${expected.length} of ${sent.length} records, one per key`);

  const consumer = kafka.consumer({ groupId: `read-${TOPIC}`, maxWaitTimeInMs: 500 });
  const got = [];
  await consumer.connect();
  try {
    await consumer.subscribe({ topics: [TOPIC], fromBeginning: true });
    await consumer.run({
      autoCommit: false,
      eachMessage: async ({ message }) => {
        got.push({ offset: Number(message.offset), key: message.key, value: message.value });
      },
    });
    const last = expected[expected.length - 1].offset;
    await common.waitFor(`${TOPIC} consumed up to ${last}`, () => got.length && got[got.length - 1].offset >= last);
  } finally {
    await consumer.disconnect();
  }
  check(sameRecords(got, expected), `${TOPIC}: kafkajs read ${show(got)}, the compacted log is ${show(expected)}`);
  const tombstone = got.find((r) => r.key.toString() === TOMBSTONE_KEY);
  check(tombstone.value === null, `${TOPIC}: the tombstone came back as ${tombstone.value}`);
  const gaps = expected[expected.length - 1].offset + 1 - expected.length;
  console.log(`${TOPIC}: kafkajs read one record per key at its original offset across ${gaps} gaps, the tombstone null`);
  console.log('kafka_compacted_read: the compacted log read back');
});
