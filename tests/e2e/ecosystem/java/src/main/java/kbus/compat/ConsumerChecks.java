package kbus.compat;

import static kbus.compat.Env.check;
import static kbus.compat.Env.equal;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.consumer.RangeAssignor;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.RebalanceInProgressException;

final class ConsumerChecks {
    private ConsumerChecks() {}

    static void produce(Env env, String topic, int n) throws Exception {
        KafkaProducer<String, String> producer = env.producer();
        for (int i = 0; i < n; i++) producer.send(new ProducerRecord<>(topic, "key-" + i, "value-" + i));
        producer.flush();
    }

    static Set<Integer> partitions(KafkaConsumer<String, String> c) {
        Set<Integer> ps = new HashSet<>();
        for (TopicPartition tp : c.assignment()) ps.add(tp.partition());
        return ps;
    }

    /** Polls both members in turn until each holds {@code each} partitions and {@code total} records arrived. */
    static Set<String> pollPair(KafkaConsumer<String, String> a, KafkaConsumer<String, String> b, int each, int total) {
        Set<String> seen = new HashSet<>();
        long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
        while (seen.size() < total || a.assignment().size() != each || b.assignment().size() != each) {
            if (System.nanoTime() > deadline)
                throw new AssertionError("group did not settle: " + partitions(a) + " / " + partitions(b) + ", " + seen.size() + " records");
            for (KafkaConsumer<String, String> c : List.of(a, b)) {
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(100))) seen.add(r.partition() + "@" + r.offset());
                try {
                    if (!c.assignment().isEmpty()) c.commitSync();
                } catch (RebalanceInProgressException e) {
                    // Kafka's answer too while the other member joins: poll() completes the rebalance
                }
            }
        }
        return seen;
    }

    /** Two members with the range assignor split four partitions into two contiguous halves and read everything. */
    static void rangeGroup(Env env) throws Exception {
        String topic = env.name("t");
        env.createTopic(topic, 4, Map.of());
        produce(env, topic, 200);
        Properties p = env.consumerProps(env.name("g"));
        p.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, RangeAssignor.class.getName());
        KafkaConsumer<String, String> a = env.consumer(p);
        KafkaConsumer<String, String> b = env.consumer(p);
        a.subscribe(List.of(topic));
        b.subscribe(List.of(topic));
        Set<String> seen = pollPair(a, b, 2, 200);
        equal(200, seen.size(), "distinct records read by the group");
        Set<Integer> pa = partitions(a);
        Set<Integer> pb = partitions(b);
        check(pa.equals(Set.of(0, 1)) && pb.equals(Set.of(2, 3)) || pa.equals(Set.of(2, 3)) && pb.equals(Set.of(0, 1)),
              "range halves: " + pa + " / " + pb);
    }

    /** Cooperative-sticky: the first member keeps half of its partitions and gives up only the other half. */
    static void cooperativeSticky(Env env) throws Exception {
        String topic = env.name("t");
        env.createTopic(topic, 4, Map.of());
        produce(env, topic, 40);
        Properties p = env.consumerProps(env.name("g"));
        p.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, CooperativeStickyAssignor.class.getName());
        List<TopicPartition> revoked = new ArrayList<>();
        KafkaConsumer<String, String> a = env.consumer(p);
        a.subscribe(List.of(topic), new ConsumerRebalanceListener() {
            @Override
            public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                revoked.addAll(partitions);
            }

            @Override
            public void onPartitionsAssigned(Collection<TopicPartition> partitions) {}
        });
        Env.pollAtLeast(a, 40, Duration.ofSeconds(30));
        equal(4, a.assignment().size(), "first member's partitions");
        Set<Integer> before = partitions(a);
        a.commitSync();
        KafkaConsumer<String, String> b = env.consumer(p);
        b.subscribe(List.of(topic));
        pollPair(a, b, 2, 0);
        equal(2, revoked.size(), "partitions revoked from the first member (only those that move)");
        check(before.containsAll(partitions(a)), "the first member kept its own partitions");
        Set<Integer> union = new HashSet<>(partitions(a));
        union.addAll(partitions(b));
        equal(Set.of(0, 1, 2, 3), union, "all partitions assigned");
    }

    /** A static member's close does not leave the group; rejoining with the same group.instance.id gets its
     *  partitions back in the same generation (no rebalance). */
    static void staticMembership(Env env) throws Exception {
        String topic = env.name("t");
        String group = env.name("g");
        env.createTopic(topic, 2, Map.of());
        produce(env, topic, 10);
        Properties p = env.consumerProps(group);
        p.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, "dashboard-1");
        p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "30000");
        KafkaConsumer<String, String> first = env.consumer(p);
        first.subscribe(List.of(topic));
        Env.pollAtLeast(first, 10, Duration.ofSeconds(30));
        int generation = first.groupMetadata().generationId();
        Set<Integer> assigned = partitions(first);
        equal(Optional.of("dashboard-1"), first.groupMetadata().groupInstanceId(), "group instance id");
        first.commitSync();
        first.close();
        ConsumerGroupDescription d = env.admin.describeConsumerGroups(List.of(group)).all().get().get(group);
        equal(1, d.members().size(), "members after a static member's close");
        MemberDescription m = d.members().iterator().next();
        equal(Optional.of("dashboard-1"), m.groupInstanceId(), "described group instance id");
        KafkaConsumer<String, String> again = env.consumer(p);
        again.subscribe(List.of(topic));
        long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
        while (again.assignment().isEmpty()) {
            check(System.nanoTime() < deadline, "the static member got no partitions back");
            again.poll(Duration.ofMillis(100));
        }
        equal(assigned, partitions(again), "partitions after rejoining");
        equal(generation, again.groupMetadata().generationId(), "generation after a static rejoin");
    }

    /** offsetsForTimes, seek, seekToBeginning/End, position, beginning/endOffsets on an assigned partition. */
    static void seekAndOffsetsForTimes(Env env) throws Exception {
        String topic = env.name("t");
        env.createTopic(topic, 1, Map.of());
        long base = System.currentTimeMillis() - 100_000;
        KafkaProducer<String, String> producer = env.producer();
        for (int i = 0; i < 10; i++) producer.send(new ProducerRecord<>(topic, 0, base + i * 1000L, "k" + i, "v" + i));
        producer.flush();
        TopicPartition tp = new TopicPartition(topic, 0);
        KafkaConsumer<String, String> c = env.consumer(env.consumerProps(null));
        c.assign(List.of(tp));
        Map<TopicPartition, OffsetAndTimestamp> found = c.offsetsForTimes(Map.of(tp, base + 3500));
        equal(4L, found.get(tp).offset(), "offset for a time between records");
        equal(base + 4000, found.get(tp).timestamp(), "timestamp of that record");
        check(c.offsetsForTimes(Map.of(tp, base + 20_000)).get(tp) == null, "no offset after the last timestamp");
        c.seek(tp, found.get(tp).offset());
        ConsumerRecord<String, String> first = Env.pollAtLeast(c, 1, Duration.ofSeconds(15)).get(0);
        equal(4L, first.offset(), "first record after seek");
        equal("v4", first.value(), "its value");
        equal(base + 4000, first.timestamp(), "its timestamp");
        c.seekToBeginning(List.of(tp));
        equal(0L, c.position(tp), "position after seekToBeginning");
        c.seekToEnd(List.of(tp));
        equal(10L, c.position(tp), "position after seekToEnd");
        equal(0L, c.beginningOffsets(List.of(tp)).get(tp), "beginningOffsets");
        equal(10L, c.endOffsets(List.of(tp)).get(tp), "endOffsets");
    }

    /** commitSync with metadata, commitAsync with a callback, committed(), and a new member resuming there. */
    static void commitSyncAsync(Env env) throws Exception {
        String topic = env.name("t");
        String group = env.name("g");
        env.createTopic(topic, 1, Map.of());
        produce(env, topic, 10);
        TopicPartition tp = new TopicPartition(topic, 0);
        KafkaConsumer<String, String> c = env.consumer(env.consumerProps(group));
        c.subscribe(List.of(topic));
        Env.pollAtLeast(c, 10, Duration.ofSeconds(30));
        c.commitSync(Map.of(tp, new OffsetAndMetadata(5, "halfway")));
        OffsetAndMetadata committed = c.committed(Set.of(tp)).get(tp);
        equal(5L, committed.offset(), "committed offset");
        equal("halfway", committed.metadata(), "committed metadata");
        AtomicReference<Exception> result = new AtomicReference<>();
        boolean[] done = {false};
        c.commitAsync(Map.of(tp, new OffsetAndMetadata(8)), (offsets, e) -> {
            result.set(e);
            done[0] = true;
        });
        long deadline = System.nanoTime() + Duration.ofSeconds(15).toNanos();
        while (!done[0]) {
            check(System.nanoTime() < deadline, "commitAsync callback not called");
            c.poll(Duration.ofMillis(100));
        }
        check(result.get() == null, "commitAsync failed: " + result.get());
        equal(8L, c.committed(Set.of(tp)).get(tp).offset(), "offset after commitAsync");
        c.close();
        KafkaConsumer<String, String> next = env.consumer(env.consumerProps(group));
        next.subscribe(List.of(topic));
        ConsumerRecord<String, String> r = Env.pollAtLeast(next, 1, Duration.ofSeconds(30)).get(0);
        equal(8L, r.offset(), "a new member resumes at the committed offset");
    }
}
