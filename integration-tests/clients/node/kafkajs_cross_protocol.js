// kafkajs and HTTP crossing where kafkajs_produce_consume.js and
// kafkajs_group.js do not go already, as ../python/kafka_cross_protocol.py
// does for the Python clients: records produced over HTTP in the json
// embedded format read by a kafkajs consumer as their compact JSON text
// (members sorted, numbers as written, UTF-8), with the headers (a
// duplicated name in order) and timestamps as sent and a null value null;
// an offset a kafkajs group member commits read by the ext route, and an
// ext commit (with metadata) answered by admin.fetchOffsets (OffsetFetch).
//
// Usage: node kafkajs_cross_protocol.js HTTP_URL KAFKA_ADDR
'use strict';

const { Kafka, logLevel } = require('kafkajs');
const common = require('./tidelog_common');

const [baseUrl, broker] = process.argv.slice(2);
const kafka = new Kafka({ brokers: [broker], clientId: 'kafkajs-cross', logLevel: logLevel.WARN });
const check = common.check;
const JSON_FORMAT = 'application/vnd.kafka.json.v2+json';

// [key JSON as sent or null, value JSON as sent, the key and value bytes a
// consumer must read], spelled out so that the canonical form is checked.
const SAMPLES = [
  ['{"b": 1, "a": [1, 2.50]}', '{"z": "h\\u00e9llo \\"q\\"", "n": 1e2, "big": 18446744073709551616}', '{"a":[1,2.50],"b":1}', '{"big":18446744073709551616,"n":1e2,"z":"h\u00e9llo \\"q\\""}'],
  ['"k2"', '[true, null, "x"]', '"k2"', '[true,null,"x"]'],
  [null, '42', null, '42'],
  ['7', 'null', '7', null],
];
const HEADERS = [['h', Buffer.from([1])], ['h', Buffer.from([0, 0xff])], ['other', Buffer.from('x')]];

// Every record of topic/partition 0 from the beginning, `count` of them, by
// a fresh group (kafkajs has no assign).
async function consume(topic, count) {
  const consumer = kafka.consumer({ groupId: `read-${topic}`, maxWaitTimeInMs: 500 });
  const records = [];
  await consumer.connect();
  try {
    await consumer.subscribe({ topics: [topic], fromBeginning: true });
    await consumer.run({ autoCommit: false, eachMessage: async ({ message }) => records.push(message) });
    await common.waitFor(`${count} records of ${topic}`, () => records.length >= count);
  } finally {
    await consumer.disconnect();
  }
  return records;
}

function headerList(headers) {
  const out = [];
  for (const [name, values] of Object.entries(headers || {})) for (const value of [].concat(values)) out.push([name, value]);
  return out;
}

async function httpJsonToKafka() {
  const topic = 'xp-json-kafkajs';
  await common.createTopic(baseUrl, topic, 1);
  const records = SAMPLES.map(([key, value], i) => {
    const fields = [`"value": ${value}`, `"timestamp": ${1660000001000 - i}`];
    if (key !== null) fields.push(`"key": ${key}`);
    const headers = HEADERS.slice(0, i + 1).map(([n, v]) => `{"name": "${n}", "value": "${v.toString('base64')}"}`);
    fields.push(`"headers": [${headers.join(', ')}]`);
    return `{${fields.join(', ')}}`;
  });
  const response = await fetch(`${baseUrl}/topics/${topic}/partitions/0`, {
    method: 'POST',
    headers: { 'Content-Type': JSON_FORMAT },
    body: `{"records": [${records.join(', ')}]}`,
    signal: AbortSignal.timeout(30000),
  });
  check(response.status === 200, `json produce to ${topic}: HTTP ${response.status}: ${await response.text()}`);
  const got = await consume(topic, SAMPLES.length);
  check(got.length === SAMPLES.length, `${topic}: ${got.length} records consumed, ${SAMPLES.length} produced`);
  got.forEach((message, i) => {
    const [, , keyBytes, valueBytes] = SAMPLES[i];
    const what = `${topic}@${i}`;
    check(Number(message.offset) === i, `${what}: offset ${message.offset}`);
    check(common.sameBytes(message.key, keyBytes && Buffer.from(keyBytes)), `${what}: key ${message.key}, expected ${keyBytes}`);
    check(common.sameBytes(message.value, valueBytes && Buffer.from(valueBytes)), `${what}: value ${message.value}, expected ${valueBytes}`);
    check(message.value !== null || valueBytes === null, `${what}: value null`);
    const headers = headerList(message.headers);
    const want = HEADERS.slice(0, i + 1);
    check(
      headers.length === want.length && headers.every(([n, v], j) => n === want[j][0] && common.sameBytes(v, want[j][1])),
      `${what}: headers ${JSON.stringify(headers)}`,
    );
    check(Number(message.timestamp) === 1660000001000 - i, `${what}: timestamp ${message.timestamp}`);
  });
  console.log(`${topic}: ${SAMPLES.length} records produced over HTTP (json format) read by kafkajs, the same bytes`);
}

async function groupOffsets(admin) {
  const topic = 'xp-offsets-kafkajs';
  const group = `${topic}-group`;
  await common.createTopic(baseUrl, topic, 1);
  await common.produceBinary(baseUrl, topic, 0, [0, 1, 2, 3, 4].map((i) => ({ value: Buffer.from(`r${i}`).toString('base64') })));

  // A member of the group commits after its fourth record: offset 4.
  const consumer = kafka.consumer({ groupId: group, maxWaitTimeInMs: 200, sessionTimeout: 10000, heartbeatInterval: 300 });
  let handled = 0;
  await consumer.connect();
  try {
    await consumer.subscribe({ topics: [topic], fromBeginning: true });
    await consumer.run({
      autoCommit: false,
      eachMessage: async ({ message }) => {
        const offset = Number(message.offset);
        if (offset === 3) await consumer.commitOffsets([{ topic, partition: 0, offset: '4' }]);
        handled = Math.max(handled, offset + 1);
      },
    });
    await common.waitFor(`${group} handled 5 records`, () => handled >= 5);
  } finally {
    await consumer.disconnect();
  }
  let response = await common.request('GET', `${baseUrl}/consumer-groups/${group}/offsets`);
  common.expectStatus(response, 200, 'ext group offsets');
  const offsets = response.json().offsets.map((o) => [o.topic, o.partition, o.offset]);
  check(JSON.stringify(offsets) === JSON.stringify([[topic, 0, 4]]), `the ext route answers ${JSON.stringify(offsets)} for kafkajs's commit of 4`);

  response = await common.request('POST', `${baseUrl}/consumer-groups/${group}/offsets`, {
    offsets: [{ topic, partition: 0, offset: 2, metadata: 'from http' }],
  });
  common.expectStatus(response, 204, 'ext commit');
  const [fetched] = await admin.fetchOffsets({ groupId: group, topics: [topic] });
  const [partition] = fetched.partitions;
  check(
    fetched.topic === topic && partition.partition === 0 && partition.offset === '2' && partition.metadata === 'from http',
    `admin.fetchOffsets answers ${JSON.stringify(fetched)} after the ext commit of 2`,
  );
  console.log(`${group}: a kafkajs commit read by the ext route, an ext commit by admin.fetchOffsets`);
}

common.main(async () => {
  check(baseUrl && broker, 'usage: kafkajs_cross_protocol.js HTTP_URL KAFKA_ADDR');
  await httpJsonToKafka();
  const admin = kafka.admin();
  await admin.connect();
  try {
    await groupOffsets(admin);
  } finally {
    await admin.disconnect();
  }
  console.log('kafka_cross_protocol: every crossing checked');
});
