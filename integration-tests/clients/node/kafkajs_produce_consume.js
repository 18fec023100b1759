// kafkajs against tidelog's Kafka listener: produce with acks 1 and all
// (-1), uncompressed and gzip (its codecs without a native add-on;
// idempotent: false, as InitProducerId is not served yet), read back by a
// consumer and checked key, value, header (duplicates in order) and
// timestamp at the offset the produce answered; seek by timestamp with
// admin.fetchTopicOffsetsByTimestamp (ListOffsets); records produced over
// HTTP read over Kafka with the same bytes, headers and timestamps, and
// records produced over Kafka read over HTTP.
//
// kafkajs has no `assign`: each topic is read by a consumer of its own
// group (nothing committed before) from the beginning, with
// partitionsConsumedConcurrently 1, which is what assign + seek 0 reads.
//
// Usage: node kafkajs_produce_consume.js http://127.0.0.1:PORT 127.0.0.1:KAFKA_PORT
'use strict';

const { Kafka, CompressionTypes, Partitioners, logLevel } = require('kafkajs');
const common = require('./tidelog_common');

const [baseUrl, broker] = process.argv.slice(2);
const kafka = new Kafka({ brokers: [broker], clientId: 'kafkajs-produce-consume', logLevel: logLevel.WARN });
const check = common.check;

// The i-th record: some keyless, one null value, 0-3 headers with a
// duplicated name, timestamps out of order.
function sample(i) {
  const key = i % 7 === 0 ? null : Buffer.from(`key-${i}`);
  const value = i === 11 ? null : Buffer.concat(Array(i + 1).fill(Buffer.from([i, 0xff, 0x00])));
  const headers = [['h', Buffer.from(`${i}`)], ['h', Buffer.from('duplicate kept')], ['raw', Buffer.from([0x80, i])]].slice(0, i % 4);
  const timestamp = 1700000000000 + ((i * 7919) % 1000);
  return { key, value, headers, timestamp };
}

// kafkajs takes headers as an object; a name with several values is an
// array, kept in order on the wire.
function headerObject(headers) {
  const object = {};
  for (const [name, value] of headers) {
    object[name] = object[name] === undefined ? value : [].concat(object[name], value);
  }
  return object;
}

function checkRecord(got, want, what) {
  check(Number(got.offset) === want.offset, `${what}: offset ${got.offset}, produced at ${want.offset}`);
  check(common.sameBytes(got.key, want.key), `${what}: key ${got.key}, produced ${want.key}`);
  check(common.sameBytes(got.value, want.value), `${what}: value ${got.value}, produced ${want.value}`);
  const gotHeaders = [];
  for (const [name, values] of Object.entries(got.headers || {})) {
    for (const value of [].concat(values)) gotHeaders.push([name, value]);
  }
  check(
    gotHeaders.length === want.headers.length &&
      gotHeaders.every(([n, v], i) => n === want.headers[i][0] && common.sameBytes(v, want.headers[i][1])),
    `${what}: headers ${JSON.stringify(gotHeaders)}, produced ${JSON.stringify(want.headers)}`,
  );
  check(Number(got.timestamp) === want.timestamp, `${what}: timestamp ${got.timestamp}, produced ${want.timestamp}`);
}

// Sends `count` sample records to topic/partition in batches of 7 (several
// batches per request) and returns them with the offsets the produce
// answered.
async function produce(topic, partition, count, acks, compression) {
  const producer = kafka.producer({
    idempotent: false,
    allowAutoTopicCreation: false,
    createPartitioner: Partitioners.DefaultPartitioner,
  });
  await producer.connect();
  const answered = [];
  try {
    for (let start = 0; start < count; start += 7) {
      const batch = [];
      for (let i = start; i < Math.min(start + 7, count); i++) batch.push(sample(i));
      const [meta] = await producer.send({
        topic,
        acks,
        compression,
        messages: batch.map((r) => ({
          key: r.key,
          value: r.value,
          headers: headerObject(r.headers),
          partition,
          timestamp: String(r.timestamp),
        })),
      });
      check(meta.errorCode === 0, `${topic}: produce answered error ${meta.errorCode}`);
      batch.forEach((r, i) => answered.push({ ...r, offset: Number(meta.baseOffset) + i }));
    }
  } finally {
    await producer.disconnect();
  }
  return answered;
}

// Every record of `topic`/`partition` from offset 0, `count` of them.
async function consume(topic, partition, count) {
  const consumer = kafka.consumer({ groupId: `read-${topic}`, maxWaitTimeInMs: 500 });
  await consumer.connect();
  const records = [];
  try {
    await consumer.subscribe({ topics: [topic], fromBeginning: true });
    await consumer.run({
      autoCommit: false,
      eachMessage: async ({ partition: p, message }) => {
        if (p === partition) records.push(message);
      },
    });
    await common.waitFor(`${count} records of ${topic}/${partition}`, () => records.length >= count);
  } finally {
    await consumer.disconnect();
  }
  check(records.length === count, `${topic}/${partition}: ${records.length} records consumed, ${count} produced`);
  return records;
}

async function seekByTimestamp(admin, topic, partition, timestamps) {
  const targets = [0, Math.min(...timestamps), Math.max(...timestamps), Math.max(...timestamps) + 1];
  for (let i = 0; i < timestamps.length; i += 3) targets.push(timestamps[i] + 1);
  for (const target of targets) {
    const answer = await admin.fetchTopicOffsetsByTimestamp(topic, target);
    const found = answer.find((p) => p.partition === partition);
    let first = timestamps.findIndex((t) => t >= target);
    // Past the largest timestamp Kafka answers -1, which kafkajs replaces
    // with the partition's end.
    if (first === -1) first = timestamps.length;
    check(Number(found.offset) === first, `${topic}: fetchTopicOffsetsByTimestamp(${target}) = ${found.offset}, expected ${first}`);
  }
  console.log(`${topic}: fetchTopicOffsetsByTimestamp matched a scan for ${targets.length} targets`);
}

async function kafkaProduceThenConsume(admin) {
  for (const [label, acks] of [['1', 1], ['all', -1]]) {
    for (const [name, codec] of [['none', CompressionTypes.None], ['gzip', CompressionTypes.GZIP]]) {
      const topic = `kj-${label}-${name}`;
      await common.createTopic(baseUrl, topic, 2);
      const answered = await produce(topic, 1, 30, acks, codec);
      const offsets = answered.map((r) => r.offset);
      check(offsets.every((o, i) => o === i), `${topic}: produce answered offsets ${offsets}`);
      const got = await consume(topic, 1, answered.length);
      got.forEach((record, i) => checkRecord(record, answered[i], `${topic}@${answered[i].offset}`));
      console.log(`${topic}: 30 records produced with acks=${label}, codec=${name}, consumed back`);
    }
  }
  await common.createTopic(baseUrl, 'kj-times', 1);
  const answered = await produce('kj-times', 0, 30, -1, CompressionTypes.None);
  await seekByTimestamp(admin, 'kj-times', 0, answered.map((r) => r.timestamp));
  await kafkaProduceHttpConsume('kj-times', answered);
}

async function kafkaProduceHttpConsume(topic, answered) {
  const records = await common.fetchAll(baseUrl, topic, 0, answered.length);
  records.forEach((record, i) => {
    const want = answered[i];
    const what = `${topic}@${want.offset} over HTTP`;
    const bytes = (text) => (text === null || text === undefined ? null : Buffer.from(text, 'base64'));
    check(record.offset === want.offset, `${what}: offset ${record.offset}`);
    check(common.sameBytes(bytes(record.key), want.key), `${what}: key ${record.key}`);
    check(common.sameBytes(bytes(record.value), want.value), `${what}: value ${record.value}`);
    const headers = (record.headers || []).map((h) => [h.name, bytes(h.value)]);
    check(
      headers.length === want.headers.length &&
        headers.every(([n, v], j) => n === want.headers[j][0] && common.sameBytes(v, want.headers[j][1])),
      `${what}: headers ${JSON.stringify(record.headers)}`,
    );
    check(record.timestamp === want.timestamp, `${what}: timestamp ${record.timestamp}, produced ${want.timestamp}`);
  });
  console.log(`${topic}: ${answered.length} records produced over Kafka, read over HTTP`);
}

async function httpProduceKafkaConsume() {
  const topic = 'kj-from-http';
  await common.createTopic(baseUrl, topic, 1);
  const want = [];
  const records = [];
  for (let i = 0; i < 12; i++) {
    const value = Buffer.concat(Array(i).fill(Buffer.from([0xc3, i])));
    const key = i % 2 === 0 ? Buffer.from(`k${i}`) : null;
    const headers = i % 3 === 0 ? [['t', Buffer.from([i])], ['t', Buffer.from('again')]] : [];
    const timestamp = 1650000000000 + i;
    const record = { value: value.toString('base64'), timestamp };
    if (key) record.key = key.toString('base64');
    if (headers.length) record.headers = headers.map(([name, v]) => ({ name, value: v.toString('base64') }));
    records.push(record);
    want.push({ offset: i, key, value, headers, timestamp });
  }
  await common.produceBinary(baseUrl, topic, 0, records);
  const got = await consume(topic, 0, records.length);
  got.forEach((record, i) => checkRecord(record, want[i], `${topic}@${i}`));
  console.log(`${topic}: ${records.length} records produced over HTTP, consumed over Kafka`);
}

common.main(async () => {
  check(baseUrl && broker, 'usage: kafkajs_produce_consume.js HTTP_URL KAFKA_ADDR');
  const admin = kafka.admin();
  await admin.connect();
  try {
    await kafkaProduceThenConsume(admin);
  } finally {
    await admin.disconnect();
  }
  await httpProduceKafkaConsume();
  console.log('kafkajs_produce_consume: every record came back');
});
