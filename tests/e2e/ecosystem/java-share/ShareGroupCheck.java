// KIP-932 with the Java client (kafka-clients 4.x): a share group of 3 KafkaShareConsumers consumes one partition
// together with explicit acknowledgement; released records come back, rejected ones never do, records held past
// the acquisition lock come back, and no record is delivered more than the delivery-count limit. Run against kbus
// and against Apache Kafka 4.x by tests/e2e/ecosystem/test_java_share_consumer.py; prints RESULT PASS|FAIL <why>.
//   java ShareGroupCheck <bootstrap> <topic> <group> <delivery count limit> <lock duration ms>
import java.time.Duration;
import java.util.*;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.serialization.*;

public class ShareGroupCheck {
    static KafkaShareConsumer<String, String> consumer(String bootstrap, String group, String id) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("group.id", group);
        p.put("client.id", id);
        p.put("share.acknowledgement.mode", "explicit");
        p.put("max.poll.records", "5");
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        return new KafkaShareConsumer<>(p);
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], group = args[2];
        int limit = Integer.parseInt(args[3]);
        long lockMs = Long.parseLong(args[4]);
        try {
            run(bootstrap, topic, group, limit, lockMs);
            System.out.println("RESULT PASS");
        } catch (AssertionError e) {
            System.out.println("RESULT FAIL " + e.getMessage());
        }
        System.exit(0);
    }

    static void check(boolean ok, String what) {
        if (!ok) throw new AssertionError(what);
    }

    static void run(String bootstrap, String topic, String group, int limit, long lockMs) throws Exception {
        Properties ap = new Properties();
        ap.put("bootstrap.servers", bootstrap);
        try (Admin admin = Admin.create(ap)) {
            admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get();
        }
        Properties pp = new Properties();
        pp.put("bootstrap.servers", bootstrap);
        pp.put("key.serializer", StringSerializer.class.getName());
        pp.put("value.serializer", StringSerializer.class.getName());
        KafkaProducer<String, String> producer = new KafkaProducer<>(pp);
        List<KafkaShareConsumer<String, String>> workers = new ArrayList<>();
        for (int i = 0; i < 3; i++) {
            workers.add(consumer(bootstrap, group, "worker-" + i));
            workers.get(i).subscribe(List.of(topic));
        }
        // share.auto.offset.reset is latest (the default): warm up until a record sent now reaches the group
        boolean warm = false;
        long until = System.currentTimeMillis() + 60000;
        while (!warm && System.currentTimeMillis() < until) {
            producer.send(new ProducerRecord<>(topic, "warm", "warm")).get();
            for (KafkaShareConsumer<String, String> c : workers) {
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(300))) {
                    c.acknowledge(r, AcknowledgeType.ACCEPT);
                    warm = true;
                }
                c.commitSync();
            }
        }
        check(warm, "no record reached the share group within 60 s");

        // a fourth member takes records and sits on them: its acquisition locks run out
        KafkaShareConsumer<String, String> hog = consumer(bootstrap, group, "hog");
        hog.subscribe(List.of(topic));
        int n = 30;
        for (int i = 0; i < n; i++) {
            producer.send(new ProducerRecord<>(topic, "k" + i, "r" + i)).get();  // one record per batch
        }
        Set<Integer> held = new HashSet<>();
        until = System.currentTimeMillis() + 20000;
        while (held.isEmpty() && System.currentTimeMillis() < until) {
            for (ConsumerRecord<String, String> r : hog.poll(Duration.ofMillis(500))) {
                if (r.value().startsWith("r")) held.add(Integer.parseInt(r.value().substring(1)));
            }
        }
        check(!held.isEmpty(), "the fourth member got no record");

        // i % 5: 0, 4 accepted; 1 released on its first delivery to a worker, then accepted; 2 rejected;
        // 3 always released (delivered `limit` times, then archived)
        Map<Integer, Integer> deliveries = new HashMap<>();
        Map<Integer, Integer> accepted = new HashMap<>();
        Map<Integer, Short> heldRedelivery = new HashMap<>();
        Set<String> consumersWithRecords = new HashSet<>();
        int extra = 0;
        long quietUntil = -1;
        until = System.currentTimeMillis() + 60000;
        while (System.currentTimeMillis() < until) {
            for (int w = 0; w < workers.size(); w++) {
                KafkaShareConsumer<String, String> c = workers.get(w);
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                    if (!r.value().startsWith("r")) {
                        c.acknowledge(r, AcknowledgeType.ACCEPT);
                        continue;
                    }
                    int i = Integer.parseInt(r.value().substring(1));
                    consumersWithRecords.add("worker-" + w);
                    int seen = deliveries.merge(i, 1, Integer::sum);
                    short count = r.deliveryCount().orElse((short) -1);
                    if (held.contains(i) && !heldRedelivery.containsKey(i)) heldRedelivery.put(i, count);
                    AcknowledgeType type;
                    switch (i % 5) {
                        case 1: type = seen == 1 ? AcknowledgeType.RELEASE : AcknowledgeType.ACCEPT; break;
                        case 2: type = AcknowledgeType.REJECT; break;
                        case 3: type = AcknowledgeType.RELEASE; break;
                        default: type = AcknowledgeType.ACCEPT;
                    }
                    if (type == AcknowledgeType.ACCEPT) accepted.merge(i, 1, Integer::sum);
                    c.acknowledge(r, type);
                }
                c.commitSync();
            }
            boolean done = true;
            for (int i = 0; i < n; i++) {
                int mod = i % 5;
                if ((mod == 0 || mod == 1 || mod == 4) && !accepted.containsKey(i)) done = false;
                if (mod == 2 && !deliveries.containsKey(i)) done = false;
                if (mod == 3 && deliveries.getOrDefault(i, 0) + (held.contains(i) ? 1 : 0) < limit) done = false;
            }
            if (done && quietUntil < 0) quietUntil = System.currentTimeMillis() + 2 * lockMs + 1000;
            if (quietUntil > 0 && System.currentTimeMillis() > quietUntil) break;
        }
        for (int i = 0; i < n; i++) {
            int mod = i % 5;
            int d = deliveries.getOrDefault(i, 0) + (held.contains(i) ? 1 : 0);
            if (mod == 0 || mod == 1 || mod == 4)
                check(accepted.getOrDefault(i, 0) == 1, "r" + i + " accepted " + accepted.getOrDefault(i, 0) + " times");
            if (mod == 1) check(deliveries.getOrDefault(i, 0) >= 2, "released r" + i + " not redelivered");
            if (mod == 2) check(deliveries.getOrDefault(i, 0) == 1, "rejected r" + i + " delivered " + d + " times");
            if (mod == 3) check(d == limit, "always-released r" + i + " delivered " + d + " times, limit " + limit);
        }
        for (int i : held) {
            check(heldRedelivery.containsKey(i), "r" + i + " held past its lock never came back");
            check(heldRedelivery.get(i) >= 2, "r" + i + " came back with delivery count " + heldRedelivery.get(i));
        }
        check(consumersWithRecords.size() >= 2, "only " + consumersWithRecords + " got records");
        System.out.println("INFO held=" + held + " consumers=" + consumersWithRecords + " deliveries=" + deliveries);
        hog.close(Duration.ofSeconds(5));
        for (KafkaShareConsumer<String, String> c : workers) c.close(Duration.ofSeconds(5));
        producer.close();
    }
}
