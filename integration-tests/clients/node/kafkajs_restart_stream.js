// kafkajs through tidelog restarts: the stream of
// ../python/kafka_restart_stream.py (its docstring has the handshake with
// the Rust test through files in STATE_DIR): a producer (acks -1,
// idempotent: false, kafkajs's own retries and reconnects) sends records
// 0..COUNT-1 round robin over the partitions while one group consumer reads
// them and commits every record it handles; the test restarts tidelog
// cleanly in one stretch and kill -9s it in another. Checked here: every
// record acknowledged, every offset of the log read at least once and none
// below an offset the group had committed. STATE_DIR/report.json lists the
// acknowledged records ([partition, offset, value]) for the Rust test.
//
// Usage: node kafkajs_restart_stream.js HTTP_URL KAFKA_ADDR STATE_DIR
'use strict';

const fs = require('fs');
const path = require('path');
const { Kafka, Partitioners, logLevel } = require('kafkajs');
const common = require('./tidelog_common');

const [baseUrl, broker, stateDir] = process.argv.slice(2);
const check = common.check;
const TOPIC = 'restarts-kafkajs';
const GROUP = 'restarts-kafkajs-group';
const PARTITIONS = 3;
const COUNT = 400;
const MILESTONES = [100, 250];
const IN_FLIGHT = 50;
// kafkajs sends one request at a time per await: a few records per send
// keep the stream about as long as the Python clients'.
const PER_SEND = 2;
const PACE_MS = 10;
// Retries long enough to span a restart (recovery included).
const RETRY = { initialRetryTime: 100, maxRetryTime: 1000, retries: 60 };

const kafka = new Kafka({
  brokers: [broker],
  clientId: 'kafkajs-restarts',
  logLevel: logLevel.NOTHING,
  connectionTimeout: 3000,
  requestTimeout: 5000,
  retry: RETRY,
});

// Atomically (rename), so the test never reads half a file.
function writeState(name, text) {
  const partial = path.join(stateDir, `${name}.partial`);
  fs.writeFileSync(partial, text);
  fs.renameSync(partial, path.join(stateDir, name));
}

function waitFile(name) {
  return common.waitFor(`the test to write ${name}`, () => fs.existsSync(path.join(stateDir, name)), 90000);
}

const acked = new Map(); // number -> [partition, offset]
const seen = new Map(); // "partition/offset" -> times read
const committed = Array(PARTITIONS).fill(0);
const errors = [];
let commitFailures = 0;

async function produceStream(producer) {
  for (let number = 0; number < COUNT; number += PER_SEND) {
    for (const [k, milestone] of MILESTONES.entries()) {
      if (number === milestone) {
        writeState(`at-${k}`, String(milestone));
        await waitFile(`go-${k}`);
      }
      if (number === milestone + IN_FLIGHT) await waitFile(`restarted-${k}`);
    }
    const partition = (number / PER_SEND) % PARTITIONS;
    const numbers = [];
    for (let n = number; n < number + PER_SEND; n++) numbers.push(n);
    const [meta] = await producer.send({
      topic: TOPIC,
      acks: -1,
      messages: numbers.map((n) => ({ value: String(n), partition })),
    });
    check(meta.errorCode === 0, `produce answered error ${meta.errorCode}`);
    numbers.forEach((n, i) => acked.set(n, [partition, Number(meta.baseOffset) + i]));
    writeState('acked', String(acked.size));
    await new Promise((resolve) => setTimeout(resolve, PACE_MS));
  }
}

async function endOffsets() {
  const ends = {};
  for (let p = 0; p < PARTITIONS; p++) {
    const response = await common.request('GET', `${baseUrl}/topics/${TOPIC}/partitions/${p}/offsets`);
    common.expectStatus(response, 200, `offsets of ${TOPIC}/${p}`);
    ends[p] = response.json().end_offset;
  }
  return ends;
}

function covers(ends) {
  return Object.entries(ends).every(([p, end]) => {
    for (let o = 0; o < end; o++) if (!seen.has(`${p}/${o}`)) return false;
    return true;
  });
}

common.main(async () => {
  check(baseUrl && broker && stateDir, 'usage: kafkajs_restart_stream.js HTTP_URL KAFKA_ADDR STATE_DIR');
  await common.createTopic(baseUrl, TOPIC, PARTITIONS);
  const consumer = kafka.consumer({
    groupId: GROUP,
    sessionTimeout: 10000,
    heartbeatInterval: 300,
    maxWaitTimeInMs: 200,
    retry: RETRY,
  });
  await consumer.connect();
  await consumer.subscribe({ topics: [TOPIC], fromBeginning: true });
  await consumer.run({
    autoCommit: false,
    eachMessage: async ({ partition, message }) => {
      const offset = Number(message.offset);
      if (offset < committed[partition]) {
        errors.push(`${TOPIC}/${partition}@${offset} read again below the group's commit ${committed[partition]}`);
      }
      const key = `${partition}/${offset}`;
      seen.set(key, (seen.get(key) || 0) + 1);
      try {
        await consumer.commitOffsets([{ topic: TOPIC, partition, offset: String(offset + 1) }]);
        committed[partition] = Math.max(committed[partition], offset + 1);
      } catch (e) {
        // refused or lost with the connection: the next record's commit covers it
        commitFailures += 1;
      }
    },
  });

  const producer = kafka.producer({ idempotent: false, createPartitioner: Partitioners.DefaultPartitioner, retry: RETRY });
  await producer.connect();
  try {
    await produceStream(producer);
  } finally {
    await producer.disconnect();
  }
  check(acked.size === COUNT, `${acked.size} of ${COUNT} records acknowledged`);

  const ends = await endOffsets();
  await common.waitFor(`the consumer to read every offset up to ${JSON.stringify(ends)}`, () => covers(ends), 90000);
  await consumer.disconnect();
  check(errors.length === 0, errors.slice(0, 5).join('; '));

  const again = [...seen.values()].reduce((sum, times) => sum + times - 1, 0);
  console.log(
    `kafkajs: ${COUNT} records acknowledged through a clean restart and a kill -9, the log ends at ` +
      `${JSON.stringify(ends)}; the group read every offset (${again} again from uncommitted tails, ` +
      `${commitFailures} commits refused or lost)`,
  );
  const report = [...acked.entries()].sort((a, b) => a[0] - b[0]).map(([n, [p, o]]) => [p, o, String(n)]);
  writeState('report.json', JSON.stringify({ acked: report }));
  console.log('kafka_restart_stream: every acknowledged record reported');
});
