package kbus.compat;

import static kbus.compat.Env.check;
import static kbus.compat.Env.equal;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.regex.Pattern;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;

/** The consumer group protocol of KIP-848 ({@code group.protocol=consumer}): the broker assigns. */
final class GroupProtocolChecks {
    private GroupProtocolChecks() {}

    static Properties props(Env env, String group, String assignor) {
        Properties p = env.consumerProps(group);
        // the broker owns these with the consumer protocol: the client refuses them
        p.remove(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG);
        p.remove(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG);
        p.put("group.protocol", "consumer");
        if (assignor != null) p.put("group.remote.assignor", assignor);
        return p;
    }

    static Set<Integer> partitions(KafkaConsumer<String, String> c) {
        Set<Integer> ps = new HashSet<>();
        for (TopicPartition tp : c.assignment()) ps.add(tp.partition());
        return ps;
    }

    /** Polls every member in turn until each holds {@code each} partitions and {@code seen} has {@code total}. */
    static void settle(List<KafkaConsumer<String, String>> members, int each, Set<String> seen, int total) {
        long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
        while (true) {
            boolean settled = seen.size() >= total;
            for (KafkaConsumer<String, String> c : members) settled &= c.assignment().size() == each;
            if (settled) return;
            if (System.nanoTime() > deadline) {
                List<Set<Integer>> owned = new ArrayList<>();
                for (KafkaConsumer<String, String> c : members) owned.add(partitions(c));
                throw new AssertionError("group did not settle: " + owned + ", " + seen.size() + " of " + total);
            }
            for (KafkaConsumer<String, String> c : members)
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(100)))
                    seen.add(r.topic() + "-" + r.partition() + "@" + r.offset());
        }
    }

    /** Three members on six partitions with each server-side assignor; one leaves, the others take over. */
    static void threeMembers(Env env) throws Exception {
        for (String assignor : List.of("uniform", "range")) {
            String topic = env.name("t-" + assignor);
            env.createTopic(topic, 6, Map.of());
            ConsumerChecks.produce(env, topic, 300);
            Properties p = props(env, env.name("g-" + assignor), assignor);
            List<KafkaConsumer<String, String>> members = new ArrayList<>();
            for (int i = 0; i < 3; i++) {
                KafkaConsumer<String, String> c = env.consumer(p);
                c.subscribe(List.of(topic));
                members.add(c);
            }
            Set<String> seen = new HashSet<>();
            settle(members, 2, seen, 300);
            if (assignor.equals("range")) {
                Set<Set<Integer>> halves = new HashSet<>();
                for (KafkaConsumer<String, String> c : members) halves.add(partitions(c));
                equal(Set.of(Set.of(0, 1), Set.of(2, 3), Set.of(4, 5)), halves, "range assignment");
            }
            for (KafkaConsumer<String, String> c : members) c.commitSync();
            members.get(1).close();  // leaves the group (member epoch -1)
            List<KafkaConsumer<String, String>> rest = List.of(members.get(0), members.get(2));
            settle(rest, 3, seen, 300);
            ConsumerChecks.produce(env, topic, 300);
            settle(rest, 3, seen, 600);
            equal(600, seen.size(), "distinct records read by the group (" + assignor + ")");
            for (KafkaConsumer<String, String> c : rest) c.commitSync();
        }
    }

    /** A regex subscription picks up a topic created after it (server-side with SubscriptionPattern, 4.x). */
    static void regex(Env env) throws Exception {
        String prefix = env.name("rx");
        env.createTopic(prefix + "-a", 2, Map.of());
        ConsumerChecks.produce(env, prefix + "-a", 10);
        Properties p = props(env, env.name("g-rx"), null);
        p.put(ConsumerConfig.METADATA_MAX_AGE_CONFIG, "1000");  // 3.x resolves the pattern from its metadata
        KafkaConsumer<String, String> c = env.consumer(p);
        try {
            Class<?> sp = Class.forName("org.apache.kafka.clients.consumer.SubscriptionPattern");
            Object pattern = sp.getConstructor(String.class).newInstance(Pattern.quote(prefix) + "-.*");
            KafkaConsumer.class.getMethod("subscribe", sp).invoke(c, pattern);
        } catch (ClassNotFoundException e) {
            c.subscribe(Pattern.compile(Pattern.quote(prefix) + "-.*"));  // 3.x: resolved by the client
        }
        Set<String> seen = new HashSet<>();
        settle(List.of(c), 2, seen, 10);
        env.createTopic(prefix + "-b", 2, Map.of());
        ConsumerChecks.produce(env, prefix + "-b", 10);
        settle(List.of(c), 4, seen, 20);
        check(seen.size() == 20, "records of both topics: " + seen.size());
    }

    static void consumerGroupProtocol(Env env) throws Exception {
        threeMembers(env);
        regex(env);
    }
}
