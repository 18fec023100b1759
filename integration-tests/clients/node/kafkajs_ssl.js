// kafkajs over TLS (`ssl: { ca }`) against tidelog's SSL listener:
// produce COUNT records to partition 0 of TOPIC (made empty by the
// test) with acks -1, read them back with a consumer of its own group
// from the beginning, and check every value.
//
// Usage: node kafkajs_ssl.js BOOTSTRAP TOPIC CA_FILE
'use strict';

const fs = require('fs');
const { Kafka, Partitioners, logLevel } = require('kafkajs');
const common = require('./tidelog_common');

const COUNT = 20;
const [broker, topic, caFile] = process.argv.slice(2);
const kafka = new Kafka({
  brokers: [broker],
  clientId: 'kafkajs-ssl',
  logLevel: logLevel.WARN,
  ssl: { ca: [fs.readFileSync(caFile, 'utf8')] },
});
const check = common.check;

common.main(async () => {
  const values = Array.from({ length: COUNT }, (_, i) => `tls-kafkajs-${i}`);
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
  const consumer = kafka.consumer({ groupId: 'tls-kafkajs' });
  await consumer.connect();
  try {
    await consumer.subscribe({ topic, fromBeginning: true });
    await consumer.run({
      eachMessage: async ({ message }) => {
        got.push(message.value.toString());
      },
    });
    await common.waitFor(`${COUNT} records`, async () => got.length >= COUNT);
  } finally {
    await consumer.disconnect();
  }
  check(JSON.stringify(got) === JSON.stringify(values), `consumed ${JSON.stringify(got)}, produced ${JSON.stringify(values)}`);
  console.log('kafkajs_ssl: every record came back');
});
