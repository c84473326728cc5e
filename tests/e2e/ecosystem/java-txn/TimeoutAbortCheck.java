// Transactions v2 (KIP-890 part 2) with the Java client (kafka-clients 4.x): a transaction the coordinator aborts
// on its timeout does not end the producer. Kafka 4 bumps the epoch once for that abort, so the producer's own
// abortTransaction() of it is a retry of that end and hands it the epoch to go on with; its next transactions
// commit. Run against kbus and against Apache Kafka 4.x by tests/e2e/ecosystem/test_java_txn_timeout.py; prints
// RESULT PASS|FAIL <why>.
//   java TimeoutAbortCheck <bootstrap> <topic> <transactional id> <transaction timeout ms>
import java.time.Duration;
import java.util.*;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.*;

public class TimeoutAbortCheck {
    public static void main(String[] args) throws Exception {
        try {
            run(args[0], args[1], args[2], Integer.parseInt(args[3]));
            System.out.println("RESULT PASS");
        } catch (AssertionError e) {
            System.out.println("RESULT FAIL " + e.getMessage());
        } catch (Exception e) {
            System.out.println("RESULT FAIL " + e);
            e.printStackTrace();
        }
        System.exit(0);
    }

    static void check(boolean ok, String what) {
        if (!ok) throw new AssertionError(what);
    }

    static void waitForState(Admin admin, String id, String state) throws Exception {
        long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
        String now = "";
        while (System.nanoTime() < deadline) {
            now = admin.describeTransactions(List.of(id)).description(id).get().state().toString();
            if (now.equalsIgnoreCase(state)) return;
            Thread.sleep(200);
        }
        throw new AssertionError(id + " stayed " + now + ", not " + state);
    }

    static void run(String bootstrap, String topic, String id, int timeoutMs) throws Exception {
        Properties ap = new Properties();
        ap.put("bootstrap.servers", bootstrap);
        try (Admin admin = Admin.create(ap)) {
            admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get();
            Properties pp = new Properties();
            pp.put("bootstrap.servers", bootstrap);
            pp.put("transactional.id", id);
            pp.put("transaction.timeout.ms", String.valueOf(timeoutMs));
            pp.put("key.serializer", StringSerializer.class.getName());
            pp.put("value.serializer", StringSerializer.class.getName());
            KafkaProducer<String, String> p = new KafkaProducer<>(pp);
            p.initTransactions();
            // 1: the coordinator aborts the transaction on its timeout; the application then aborts it too
            p.beginTransaction();
            p.send(new ProducerRecord<>(topic, "k", "timed-out-1")).get();
            waitForState(admin, id, "CompleteAbort");
            p.abortTransaction();
            p.beginTransaction();
            p.send(new ProducerRecord<>(topic, "k", "committed-1"));
            p.commitTransaction();
            // 2: the application only learns of the abort from its next write or commit, then aborts
            p.beginTransaction();
            p.send(new ProducerRecord<>(topic, "k", "timed-out-2")).get();
            waitForState(admin, id, "CompleteAbort");
            boolean failed = false;
            try {
                p.send(new ProducerRecord<>(topic, "k", "late")).get();
                p.commitTransaction();
            } catch (Exception e) {
                failed = true;
                check(!(e instanceof org.apache.kafka.common.errors.ProducerFencedException)
                        && !(e.getCause() instanceof org.apache.kafka.common.errors.ProducerFencedException),
                      "the write after the timeout abort fenced the producer: " + e);
            }
            check(failed, "a transaction the coordinator aborted was committed");
            p.abortTransaction();
            p.beginTransaction();
            p.send(new ProducerRecord<>(topic, "k", "committed-2"));
            p.commitTransaction();
            p.close();
        }
        Properties cp = new Properties();
        cp.put("bootstrap.servers", bootstrap);
        cp.put("isolation.level", "read_committed");
        cp.put("key.deserializer", StringDeserializer.class.getName());
        cp.put("value.deserializer", StringDeserializer.class.getName());
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(cp)) {
            TopicPartition tp = new TopicPartition(topic, 0);
            c.assign(List.of(tp));
            c.seekToBeginning(List.of(tp));
            long end = c.endOffsets(List.of(tp)).get(tp);
            List<String> values = new ArrayList<>();
            long deadline = System.nanoTime() + Duration.ofSeconds(20).toNanos();
            while (c.position(tp) < end) {
                check(System.nanoTime() < deadline, "read_committed stopped at " + c.position(tp) + " of " + end);
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) values.add(r.value());
            }
            check(values.equals(List.of("committed-1", "committed-2")), "read_committed got " + values);
        }
    }
}
