// kafkajs logging in with SCRAM-SHA-256 over TLS (SASL_SSL: `ssl: {ca}`,
// `sasl: {mechanism: 'scram-sha-256'}`) against a tidelog that requires
// logins and checks ACLs (the test granted USER ALL on the topic prefix
// `sec-` and READ on the group prefix `sec-`): one admin call
// (createTopics of TOPIC), produce COUNT records, consume them in group
// TOPIC (auto-commit), and read the group's commit back. Then the same
// user with a wrong password: KafkaJSSASLAuthenticationError, and nothing
// produced (the partition's end offset is still COUNT).
//
// Usage: node kafkajs_sasl_ssl.js BOOTSTRAP CA_FILE TOPIC USER PASSWORD
'use strict';

const fs = require('fs');
const { Kafka, Partitioners, logLevel } = require('kafkajs');
const common = require('./tidelog_common');

const COUNT = 10;
const [broker, caFile, topic, username, password] = process.argv.slice(2);
const check = common.check;

function client(secret) {
  return new Kafka({
    brokers: [broker],
    clientId: 'kafkajs-sasl-ssl',
    logLevel: logLevel.NOTHING,
    ssl: { ca: [fs.readFileSync(caFile, 'utf8')] },
    sasl: { mechanism: 'scram-sha-256', username, password: secret },
    retry: { retries: 2 },
  });
}

common.main(async () => {
  const kafka = client(password);
  const admin = kafka.admin();
  await admin.connect();
  try {
    const created = await admin.createTopics({ topics: [{ topic, numPartitions: 1 }], waitForLeaders: true });
    check(created === true, `createTopics answered ${created}`);

    const values = Array.from({ length: COUNT }, (_, i) => `${topic}-${i}`);
    const producer = kafka.producer({
      idempotent: false,
      allowAutoTopicCreation: false,
      createPartitioner: Partitioners.DefaultPartitioner,
    });
    await producer.connect();
    try {
      const answered = await producer.send({
        topic,
        acks: -1,
        messages: values.map((value) => ({ value, partition: 0 })),
      });
      check(answered[0].errorCode === 0, `produce answered ${JSON.stringify(answered)}`);
    } finally {
      await producer.disconnect();
    }

    const got = [];
    const consumer = kafka.consumer({ groupId: topic });
    await consumer.connect();
    try {
      await consumer.subscribe({ topic, fromBeginning: true });
      await consumer.run({
        autoCommit: true,
        eachMessage: async ({ message }) => {
          got.push(message.value.toString());
        },
      });
      await common.waitFor(`${COUNT} records`, async () => got.length >= COUNT);
    } finally {
      // Disconnecting commits what was consumed.
      await consumer.disconnect();
    }
    check(JSON.stringify(got) === JSON.stringify(values), `consumed ${JSON.stringify(got)}, produced ${JSON.stringify(values)}`);
    const offsets = await admin.fetchOffsets({ groupId: topic, topics: [topic] });
    const committed = offsets[0].partitions[0].offset;
    check(committed === String(COUNT), `committed ${JSON.stringify(offsets)}`);

    let failure = null;
    const wrong = client(`wrong-${password}`).producer({ createPartitioner: Partitioners.DefaultPartitioner });
    try {
      await wrong.connect();
      await wrong.send({ topic, messages: [{ value: 'never', partition: 0 }] });
    } catch (error) {
      failure = error;
    } finally {
      await wrong.disconnect().catch(() => {});
    }
    check(failure !== null && failure.name === 'KafkaJSSASLAuthenticationError',
      `a wrong password: ${failure && failure.name}: ${failure && failure.message}`);
    const ends = await admin.fetchTopicOffsets(topic);
    check(ends[0].high === String(COUNT), `a wrong password produced something: ${JSON.stringify(ends)}`);
  } finally {
    await admin.disconnect();
  }
  console.log('kafkajs_sasl_ssl: done');
});
