package kbus.compat;

import static kbus.compat.Env.check;
import static kbus.compat.Env.equal;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import org.apache.kafka.clients.admin.TransactionListing;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.ProducerFencedException;

final class TransactionChecks {
    private TransactionChecks() {}

    static KafkaProducer<String, String> transactional(Env env, String id) {
        Properties p = env.producerProps();
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, id);
        p.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, "30000");
        return env.producer(p);
    }

    static List<String> readCommitted(Env env, String topic, int atLeast) {
        Properties p = env.consumerProps(null);
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        KafkaConsumer<String, String> c = env.consumer(p);
        TopicPartition tp = new TopicPartition(topic, 0);
        c.assign(List.of(tp));
        c.seekToBeginning(List.of(tp));
        List<String> values = new ArrayList<>();
        long deadline = System.nanoTime() + Duration.ofSeconds(20).toNanos();
        // read up to the end offset: what read_committed returns there is all it will ever return
        long end = c.endOffsets(List.of(tp)).get(tp);
        while (c.position(tp) < end || values.size() < atLeast) {
            check(System.nanoTime() < deadline, "read_committed got " + values + " (position " + c.position(tp) + " of " + end + ")");
            for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) values.add(r.value());
        }
        c.close();
        return values;
    }

    static int producerEpoch(Env env, String id) throws Exception {
        return env.admin.describeTransactions(List.of(id)).description(id).get().producerEpoch();
    }

    /** Commit and abort; read_committed sees only the committed records; a second producer with the same
     *  transactional.id fences the first; sendOffsetsToTransaction commits a group's offsets with the records.
     *  A 4.x client uses transactions v2 (KIP-890 part 2: the broker finalizes transaction.version 2): no
     *  AddPartitionsToTxn/AddOffsetsToTxn, and each transaction's end bumps the epoch; a 3.x client keeps v1. */
    static void commitAbortFenceOffsets(Env env) throws Exception {
        // the kafka-clients version on the class path (java_checks.py passes it)
        boolean v2 = Integer.parseInt(System.getProperty("kbus.client.version", "0").split("\\.")[0]) >= 4;
        String topic = env.name("t");
        String group = env.name("g");
        env.createTopic(topic, 1, Map.of());
        String id = env.name("txn");
        KafkaProducer<String, String> p = transactional(env, id);
        p.initTransactions();
        int initialEpoch = producerEpoch(env, id);
        p.beginTransaction();
        p.send(new ProducerRecord<>(topic, "a", "committed-1"));
        p.send(new ProducerRecord<>(topic, "a", "committed-2"));
        p.commitTransaction();
        p.beginTransaction();
        p.send(new ProducerRecord<>(topic, "a", "aborted"));
        p.flush();
        p.abortTransaction();
        p.beginTransaction();
        p.send(new ProducerRecord<>(topic, "a", "committed-3"));
        // a group with no live members: offsets from a consume-transform-produce loop that has stopped
        p.sendOffsetsToTransaction(Map.of(new TopicPartition(topic, 0), new OffsetAndMetadata(2)), new ConsumerGroupMetadata(group));
        p.commitTransaction();
        equal(initialEpoch + (v2 ? 3 : 0), producerEpoch(env, id), "epoch after three transactions (v2: " + v2 + ")");
        equal(List.of("committed-1", "committed-2", "committed-3"), readCommitted(env, topic, 3), "read_committed values");
        Map<TopicPartition, OffsetAndMetadata> offsets = env.admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
        equal(2L, offsets.get(new TopicPartition(topic, 0)).offset(), "offset committed inside the transaction");
        boolean listed = false;
        for (TransactionListing t : env.admin.listTransactions().all().get()) listed |= t.transactionalId().equals(id);
        check(listed, "listTransactions has " + id);

        KafkaProducer<String, String> successor = transactional(env, id);
        successor.initTransactions();  // bumps the epoch: the first producer is fenced
        p.beginTransaction();
        try {
            p.send(new ProducerRecord<>(topic, "a", "zombie")).get();
            p.commitTransaction();
            throw new AssertionError("a fenced producer committed");
        } catch (Exception e) {
            Throwable cause = e.getCause() != null ? e.getCause() : e;
            check(e instanceof ProducerFencedException || cause instanceof ProducerFencedException
                    || cause.getClass().getSimpleName().equals("InvalidProducerEpochException"),
                  "fenced, got " + e);
        }
        successor.beginTransaction();
        successor.send(new ProducerRecord<>(topic, "a", "committed-4"));
        successor.commitTransaction();
        List<String> values = readCommitted(env, topic, 4);
        equal(Set.of("committed-1", "committed-2", "committed-3", "committed-4"), Set.copyOf(values), "after fencing");
        equal(4, values.size(), "no zombie or aborted record visible");
    }
}
