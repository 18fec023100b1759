// kafkajs consumers in one group against tidelog's Kafka listener (its
// group protocol: JoinGroup v5 / SyncGroup v3, its round-robin assigner's
// bytes, OffsetCommit and OffsetFetch), the phases of
// ../python/kafka_python_group.py: two members, a third joins (a
// rebalance), one leaves (another), records produced in every phase; each
// member commits every record it handles. Checked: every record is
// consumed by the group, none below the group's commit is read again (a
// rebalance repeats only the uncommitted tail), no member reads a record
// twice. Then every member leaves, a new one resumes at the commits, the
// ext HTTP route answers the Kafka group's commits, and an ext commit is
// where a new Kafka member starts.
//
// Usage: node kafkajs_group.js http://127.0.0.1:PORT 127.0.0.1:KAFKA_PORT
'use strict';

const { Kafka, Partitioners, logLevel } = require('kafkajs');
const common = require('./tidelog_common');

const [baseUrl, broker] = process.argv.slice(2);
const kafka = new Kafka({ brokers: [broker], clientId: 'kafkajs-group', logLevel: logLevel.NOTHING });
const check = common.check;
const TOPIC = 'kjgroup';
const PARTITIONS = 6;
const GROUP = 'kjgroup-consumers';

// What the group consumed and committed.
const seen = new Map(); // "partition/offset" -> [member names]
const committed = Array(PARTITIONS).fill(0);
const errors = [];

function delivered(name, partition, offset) {
  if (offset < committed[partition]) {
    errors.push(`${name} got ${TOPIC}/${partition}@${offset}, below the group's commit ${committed[partition]}`);
  }
  const key = `${partition}/${offset}`;
  const names = seen.get(key) || [];
  if (names.includes(name)) errors.push(`${name} got ${TOPIC}/${partition}@${offset} twice`);
  names.push(name);
  seen.set(key, names);
}

function newConsumer() {
  return kafka.consumer({
    groupId: GROUP,
    sessionTimeout: 10000,
    heartbeatInterval: 300,
    maxWaitTimeInMs: 200,
    retry: { retries: 10 },
  });
}

// A member: notes every record, commits it, counts refused commits.
async function member(name) {
  const consumer = newConsumer();
  const state = { name, consumer, commitFailures: 0 };
  await consumer.connect();
  await consumer.subscribe({ topics: [TOPIC], fromBeginning: true });
  await consumer.run({
    autoCommit: false,
    eachMessage: async ({ partition, message }) => {
      const offset = Number(message.offset);
      delivered(name, partition, offset);
      try {
        await consumer.commitOffsets([{ topic: TOPIC, partition, offset: String(offset + 1) }]);
        committed[partition] = Math.max(committed[partition], offset + 1);
      } catch (e) {
        // refused in a rebalance: the tail is read again
        state.commitFailures += 1;
      }
    },
  });
  return state;
}

async function produce(producer, start, count) {
  const messages = [];
  for (let i = start; i < start + count; i++) messages.push({ value: String(i), partition: i % PARTITIONS });
  await producer.send({ topic: TOPIC, acks: -1, messages });
  return start + count;
}

async function groupMembers() {
  const response = await common.request('GET', `${baseUrl}/consumer-groups/${GROUP}`);
  return response.status === 200 ? (response.json().members || []).length : -1;
}

async function extOffsets() {
  const response = await common.request('GET', `${baseUrl}/consumer-groups/${GROUP}/offsets`);
  common.expectStatus(response, 200, 'ext group offsets');
  const offsets = {};
  for (const o of response.json().offsets) if (o.topic === TOPIC) offsets[o.partition] = o.offset;
  return offsets;
}

// Each partition's end after `produced` records spread round robin.
function endOffsets(produced) {
  const ends = {};
  for (let p = 0; p < PARTITIONS; p++) ends[p] = Math.max(0, Math.ceil((produced - p) / PARTITIONS));
  return ends;
}

const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);

async function rebalancePhases(producer) {
  const members = [await member('c1'), await member('c2')];
  let produced = await produce(producer, 0, 120);
  await common.waitFor('120 records consumed by two members', () => seen.size === produced, 120000);

  members.push(await member('c3'));
  await common.waitFor('three members in the group', async () => (await groupMembers()) === 3, 120000);
  produced = await produce(producer, produced, 180);
  await common.waitFor('300 records consumed after c3 joined', () => seen.size === produced, 120000);

  await members[1].consumer.disconnect();
  await common.waitFor('two members in the group', async () => (await groupMembers()) === 2, 120000);
  produced = await produce(producer, produced, 180);
  await common.waitFor('480 records consumed after c2 left', () => seen.size === produced, 120000);
  // Everything was committed by the last owners before they leave.
  await common.waitFor('the group\'s last commits', () => same(committed.map(String), Object.values(endOffsets(produced)).map(String)));
  await members[0].consumer.disconnect();
  await members[2].consumer.disconnect();

  check(errors.length === 0, errors.slice(0, 5).join('; '));
  const byC3 = [...seen.values()].filter((names) => names.includes('c3')).length;
  check(byC3 > 0, 'c3 joined but was given no records');
  const missing = [];
  for (const [p, end] of Object.entries(endOffsets(produced))) {
    for (let o = 0; o < end; o++) if (!seen.has(`${p}/${o}`)) missing.push(`${p}/${o}`);
  }
  check(missing.length === 0, `never consumed: ${missing.slice(0, 10)}`);
  const again = [...seen.values()].reduce((sum, names) => sum + names.length - 1, 0);
  const refused = members.reduce((sum, m) => sum + m.commitFailures, 0);
  console.log(
    `${produced} records consumed by a group of three across a join and a leave ` +
      `(${again} read again from uncommitted tails, ${refused} commits refused in rebalances)`,
  );
  return produced;
}

// A new member reads until `want` records arrived, commits them, leaves;
// the first offset it read of each partition and every record.
async function consumeFresh(name, want) {
  const consumer = newConsumer();
  const records = [];
  await consumer.connect();
  try {
    await consumer.subscribe({ topics: [TOPIC], fromBeginning: true });
    await consumer.run({
      autoCommit: false,
      eachMessage: async ({ partition, message }) => {
        records.push({ partition, offset: Number(message.offset), value: message.value.toString() });
        await consumer.commitOffsets([{ topic: TOPIC, partition, offset: String(Number(message.offset) + 1) }]);
      },
    });
    await common.waitFor(`${name}: ${want} records`, () => records.length >= want);
  } finally {
    await consumer.disconnect();
  }
  const first = {};
  for (const r of records) if (first[r.partition] === undefined) first[r.partition] = r.offset;
  return { first, records };
}

common.main(async () => {
  check(baseUrl && broker, 'usage: kafkajs_group.js HTTP_URL KAFKA_ADDR');
  await common.createTopic(baseUrl, TOPIC, PARTITIONS);
  const producer = kafka.producer({ idempotent: false, createPartitioner: Partitioners.DefaultPartitioner });
  await producer.connect();
  try {
    let produced = await rebalancePhases(producer);

    const extCommitted = await extOffsets();
    check(same(extCommitted, endOffsets(produced)), `ext route answers ${JSON.stringify(extCommitted)}, Kafka committed ${JSON.stringify(endOffsets(produced))}`);
    console.log(`the ext route reads the Kafka group's offsets: ${JSON.stringify(extCommitted)}`);

    const before = produced;
    produced = await produce(producer, produced, 60);
    let { first, records } = await consumeFresh('c4', produced - before);
    check(same(first, endOffsets(before)), `c4 started at ${JSON.stringify(first)}, the group had committed ${JSON.stringify(endOffsets(before))}`);
    const values = records.map((r) => Number(r.value)).sort((a, b) => a - b);
    check(values.length === produced - before && values.every((v, i) => v === before + i), `c4 read values ${values.slice(0, 5)}..., not ${before}..${produced}`);
    console.log(`a restarted consumer resumed at the commits and read the ${produced - before} new records`);

    const rewind = {};
    for (const [p, end] of Object.entries(endOffsets(produced))) rewind[p] = Math.max(end - 3, 0);
    const response = await common.request('POST', `${baseUrl}/consumer-groups/${GROUP}/offsets`, {
      offsets: Object.entries(rewind).map(([p, o]) => ({ topic: TOPIC, partition: Number(p), offset: o })),
    });
    common.expectStatus(response, 204, 'ext commit to the empty Kafka group');
    const want = Object.entries(endOffsets(produced)).reduce((sum, [p, end]) => sum + end - rewind[p], 0);
    ({ first, records } = await consumeFresh('c5', want));
    check(same(first, rewind), `c5 started at ${JSON.stringify(first)}, the ext route committed ${JSON.stringify(rewind)}`);
    check(records.length === want, `c5 read ${records.length} records, ${want} follow the ext commit`);
    console.log(`a Kafka consumer started at the ext route's commit ${JSON.stringify(rewind)}`);
  } finally {
    await producer.disconnect();
  }
  console.log('kafkajs_group: every record consumed once per group');
});
