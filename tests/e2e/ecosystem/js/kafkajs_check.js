// kafkajs (npm) against a kbus broker: admin, an idempotent gzip producer with headers, a consumer group of two
// members splitting a topic, committed offsets, group admin. Prints one `RESULT {json}` line.
// Usage: node kafkajs_check.js BOOTSTRAP PREFIX
const { Kafka, AssignerProtocol, CompressionTypes, logLevel } = require("kafkajs");

const [bootstrap, prefix] = process.argv.slice(2);
const kafka = new Kafka({ clientId: "kbus-kafkajs", brokers: [bootstrap], logLevel: logLevel.ERROR });
const topic = `${prefix}-t`;
const groupId = `${prefix}-g`;
const N = 60;

function until(cond, ms, what) {
  return new Promise((resolve, reject) => {
    const start = Date.now();
    const tick = () => {
      if (cond()) return resolve();
      if (Date.now() - start > ms) return reject(new Error(`timed out: ${what}`));
      setTimeout(tick, 100);
    };
    tick();
  });
}

async function main() {
  const result = {};
  const admin = kafka.admin();
  await admin.connect();
  result.created = await admin.createTopics({ topics: [{ topic, numPartitions: 3, replicationFactor: 1 }], waitForLeaders: true });
  const meta = await admin.fetchTopicMetadata({ topics: [topic] });
  result.partitions = meta.topics[0].partitions.length;

  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  const messages = [];
  for (let i = 0; i < N; i++) messages.push({ key: `k${i}`, value: `v${i}`, headers: { n: String(i) } });
  const sent = await producer.send({ topic, acks: -1, compression: CompressionTypes.GZIP, messages });
  result.acked_partitions = sent.length;
  result.produce_errors = sent.filter((r) => r.errorCode !== 0).length;
  await producer.disconnect();

  const seen = new Map();
  const byMember = [new Set(), new Set()];
  const consumers = [0, 1].map(() => kafka.consumer({ groupId, sessionTimeout: 10000, heartbeatInterval: 500 }));
  let bad = 0;
  for (const [i, c] of consumers.entries()) {
    await c.connect();
    await c.subscribe({ topic, fromBeginning: true });
    await c.run({
      eachMessage: async ({ partition, message }) => {
        byMember[i].add(partition);
        const k = message.key.toString();
        if (message.value.toString() !== `v${k.slice(1)}` || message.headers.n.toString() !== k.slice(1)) bad++;
        seen.set(k, (seen.get(k) || 0) + 1);
      },
    });
  }
  await until(() => seen.size === N, 60000, "all records consumed by the group");
  // both members end up with partitions once the group has settled
  let described;
  const start = Date.now();
  while (Date.now() - start < 60000) {
    described = (await admin.describeGroups([groupId])).groups[0];
    if (described.state === "Stable" && described.members.length === 2) break;
    await new Promise((r) => setTimeout(r, 200));
  }
  result.group_state = described.state;
  result.group_members = described.members.length;
  result.group_protocol = described.protocol;
  result.member_partitions = described.members
    .map((m) => (AssignerProtocol.MemberAssignment.decode(m.memberAssignment).assignment[topic] || []).length)
    .sort();
  result.distinct_records = seen.size;
  result.bad_records = bad;
  for (const c of consumers) await c.disconnect(); // commits what was consumed and leaves
  const offsets = await admin.fetchOffsets({ groupId, topics: [topic] });
  result.committed_total = offsets[0].partitions.reduce((s, p) => s + Number(p.offset), 0);
  result.listed = (await admin.listGroups()).groups.some((g) => g.groupId === groupId);
  await admin.deleteGroups([groupId]);
  result.listed_after_delete = (await admin.listGroups()).groups.some((g) => g.groupId === groupId);
  const topicOffsets = await admin.fetchTopicOffsets(topic);
  result.high_total = topicOffsets.reduce((s, p) => s + Number(p.high), 0);
  await admin.deleteTopics({ topics: [topic] });
  await admin.disconnect();
  console.log("RESULT " + JSON.stringify(result));
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
