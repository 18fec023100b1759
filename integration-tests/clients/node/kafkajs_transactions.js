// kafkajs' transactions against tidelog (issue 38): a transactional
// producer commits, aborts and commits again across two partitions, the
// second commit with a consumer group's offsets (`sendOffsets`:
// AddOffsetsToTxn, TxnOffsetCommit); a kafkajs consumer (read_committed,
// kafkajs' default) sees exactly the committed records, once each; the
// group's offsets are the ones the transaction committed.
//
// Usage: node kafkajs_transactions.js http://127.0.0.1:PORT 127.0.0.1:KAFKA_PORT
'use strict';

const { Kafka, logLevel } = require('kafkajs');
const common = require('./tidelog_common');

const [baseUrl, broker] = process.argv.slice(2);
const kafka = new Kafka({ brokers: [broker], clientId: 'kafkajs-txn', logLevel: logLevel.NOTHING });
const check = common.check;
const TOPIC = 'txn-kafkajs';

function records(tag, count) {
  return Array.from({ length: count }, (_, i) => ({ value: `${tag}${i}`, partition: i % 2 }));
}

common.main(async () => {
  await common.createTopic(baseUrl, TOPIC, 2);
  const producer = kafka.producer({ transactionalId: 'kafkajs-tx', maxInFlightRequests: 1, idempotent: true });
  await producer.connect();

  let txn = await producer.transaction();
  await txn.send({ topic: TOPIC, messages: records('c1-', 6) });
  await txn.commit();

  txn = await producer.transaction();
  await txn.send({ topic: TOPIC, messages: records('ab-', 4) });
  await txn.abort();

  txn = await producer.transaction();
  await txn.send({ topic: TOPIC, messages: records('c2-', 4) });
  await txn.sendOffsets({
    consumerGroupId: 'kafkajs-txn-group',
    topics: [{ topic: TOPIC, partitions: [{ partition: 0, offset: '3' }, { partition: 1, offset: '2' }] }],
  });
  await txn.commit();
  await producer.disconnect();

  const want = [...records('c1-', 6), ...records('c2-', 4)].map((r) => r.value).sort();
  const got = [];
  const consumer = kafka.consumer({ groupId: 'kafkajs-txn-reader', maxWaitTimeInMs: 200 });
  await consumer.connect();
  await consumer.subscribe({ topics: [TOPIC], fromBeginning: true });
  await consumer.run({
    autoCommit: false,
    eachMessage: async ({ message }) => {
      got.push(message.value.toString());
    },
  });
  await common.waitFor(`${want.length} committed records`, () => got.length >= want.length);
  // A moment more: nothing aborted may follow.
  await new Promise((resolve) => setTimeout(resolve, 1000));
  await consumer.disconnect();
  got.sort();
  check(JSON.stringify(got) === JSON.stringify(want), `read_committed: expected ${want}, got ${got}`);

  const admin = kafka.admin();
  await admin.connect();
  const offsets = await admin.fetchOffsets({ groupId: 'kafkajs-txn-group', topics: [TOPIC] });
  await admin.disconnect();
  const committed = offsets[0].partitions.map((p) => [p.partition, p.offset]).sort();
  check(
    JSON.stringify(committed) === JSON.stringify([[0, '3'], [1, '2']]),
    `the transaction's offsets: ${JSON.stringify(committed)}`,
  );
  console.log('kafkajs_transactions: committed seen once, aborted never, offsets committed with the transaction');
});
