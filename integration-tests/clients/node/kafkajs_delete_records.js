// kafkajs' admin.deleteTopicRecords against tidelog (the same phases as
// delete_records.py): phase `delete` creates a one-partition topic,
// produces 10 records over HTTP, deletes the records below 4 and checks
// that an offset past the high watermark is refused; then, and in phase
// `after-restart` (the Rust test restarted tidelog with kill -9 in
// between), a consumer from the beginning (a group of its own, nothing
// committed) starts at 4, fetchTopicOffsets' low (ListOffsets earliest) is
// 4, and HTTP's beginning_offset and fetch from 0 agree. Phase
// `after-restart` then deletes up to the high watermark (-1): everything.
//
// Usage: node kafkajs_delete_records.js http://127.0.0.1:PORT 127.0.0.1:KAFKA_PORT delete|after-restart
'use strict';

const { Kafka, logLevel } = require('kafkajs');
const common = require('./tidelog_common');

const [baseUrl, broker, phase] = process.argv.slice(2);
const kafka = new Kafka({ brokers: [broker], clientId: 'kafkajs-delete-records', logLevel: logLevel.NOTHING });
const check = common.check;
const TOPIC = 'delrec-kafkajs';
const COUNT = 10;
const DELETED_BELOW = 4;

async function httpOffsets() {
  const response = await common.request('GET', `${baseUrl}/topics/${TOPIC}/partitions/0/offsets`);
  common.expectStatus(response, 200, 'offsets');
  const body = response.json();
  return [body.beginning_offset, body.end_offset];
}

async function httpFirstOffset() {
  const response = await common.request(
    'GET',
    `${baseUrl}/topics/${TOPIC}/partitions/0/records?offset=0&timeout=200`,
    undefined,
    { Accept: common.BINARY },
  );
  common.expectStatus(response, 200, 'fetch from 0');
  const page = response.json();
  return page.length ? page[0].offset : null;
}

// The first offset a consumer from the beginning reads (null when nothing
// comes within a few seconds): a new group each time, nothing committed.
async function firstFromTheBeginning(run, expectNone) {
  const consumer = kafka.consumer({ groupId: `delrec-${phase}-${run}`, maxWaitTimeInMs: 200 });
  await consumer.connect();
  let first = null;
  try {
    await consumer.subscribe({ topics: [TOPIC], fromBeginning: true });
    await consumer.run({
      autoCommit: false,
      eachMessage: async ({ message }) => {
        if (first === null) first = Number(message.offset);
      },
    });
    if (expectNone) {
      await new Promise((resolve) => setTimeout(resolve, 3000));
    } else {
      await common.waitFor('a record from the beginning', () => first !== null);
    }
  } finally {
    await consumer.disconnect();
  }
  return first;
}

async function checkBeginning(admin, beginning, first, run) {
  const [offsets] = await admin.fetchTopicOffsets(TOPIC);
  check(Number(offsets.low) === beginning, `fetchTopicOffsets low ${offsets.low}, expected ${beginning}`);
  const got = await firstFromTheBeginning(run, first === null);
  check(got === first, `a consumer from the beginning started at ${got}, expected ${first}`);
  const http = await httpOffsets();
  check(http[0] === beginning && http[1] === COUNT, `HTTP offsets ${http}, expected ${beginning},${COUNT}`);
  const httpFirst = await httpFirstOffset();
  check(httpFirst === first, `HTTP fetch from 0 started at ${httpFirst}, expected ${first}`);
  console.log(`kafkajs: the beginning is ${beginning} everywhere`);
}

common.main(async () => {
  const admin = kafka.admin();
  await admin.connect();
  try {
    if (phase === 'delete') {
      await common.createTopic(baseUrl, TOPIC, 1);
      const records = [];
      for (let i = 0; i < COUNT; i++) records.push({ value: Buffer.from(`v${i}`).toString('base64') });
      await common.produceBinary(baseUrl, TOPIC, 0, records);
      await common.waitFor('the records to be visible', async () => (await httpOffsets())[1] >= COUNT);
      // deleteTopicRecords finds the leader in metadata it does not load
      // itself: the admin connected before the topic existed.
      await admin.fetchTopicMetadata({ topics: [TOPIC] });
      await admin.deleteTopicRecords({ topic: TOPIC, partitions: [{ partition: 0, offset: String(DELETED_BELOW) }] });
      let refused = null;
      try {
        await admin.deleteTopicRecords({ topic: TOPIC, partitions: [{ partition: 0, offset: String(COUNT + 5) }] });
      } catch (error) {
        refused = error;
      }
      // kafkajs checks the offset against the high watermark itself, or
      // passes on the broker's OFFSET_OUT_OF_RANGE: either way, refused.
      check(refused !== null, 'deleteTopicRecords past the high watermark was accepted');
      await checkBeginning(admin, DELETED_BELOW, DELETED_BELOW, 'a');
    } else {
      await checkBeginning(admin, DELETED_BELOW, DELETED_BELOW, 'b');
      await admin.deleteTopicRecords({ topic: TOPIC, partitions: [{ partition: 0, offset: '-1' }] });
      await checkBeginning(admin, COUNT, null, 'c');
    }
  } finally {
    await admin.disconnect();
  }
  console.log(`kafkajs_delete_records ${phase}: every view agrees`);
});
