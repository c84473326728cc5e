package kbus.compat;

import java.time.Duration;
import java.util.Collection;
import java.util.List;
import java.util.Properties;
import java.util.TreeSet;
import java.util.concurrent.CountDownLatch;
import org.apache.kafka.clients.consumer.CommitFailedException;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.RebalanceInProgressException;
import org.apache.kafka.common.errors.WakeupException;

/**
 * One member of a {@code group.protocol=consumer} group in its own JVM, so a test can kill -9 it like a crashed
 * consumer (tests/e2e/ecosystem/test_java_group_protocol.py). It prints one JSON line per event on stdout, as
 * tests/group_member.py does: {@code started}, {@code assign}/{@code revoke} (with the partitions owned after),
 * {@code msg} per record and {@code committed} after each synchronous commit, which follows every polled batch:
 * at-least-once, the uncommitted window being the batch in hand. SIGTERM closes the consumer (leaves the group).
 * Usage: GroupMember HOST:PORT GROUP ASSIGNOR|-|classic topic:NAME|regex:RE2J-PATTERN
 */
public final class GroupMember {
    private GroupMember() {}

    static synchronized void emit(String json) {
        System.out.println(json);
        System.out.flush();
    }

    static String partitions(Collection<TopicPartition> tps) {
        TreeSet<String> names = new TreeSet<>();
        for (TopicPartition tp : tps) names.add("\"" + tp.topic() + ":" + tp.partition() + "\"");
        return "[" + String.join(",", names) + "]";
    }

    public static void main(String[] args) throws Exception {
        Env env = new Env(args[0], "member");
        // ASSIGNOR `classic`: a group.protocol=classic member (its default assignors, range then cooperative-sticky),
        // for the online migration between the protocols (test_java_group_migration.py)
        Properties p = args[2].equals("classic") ? env.consumerProps(args[1])
                : GroupProtocolChecks.props(env, args[1], args[2].equals("-") ? null : args[2]);
        p.put("max.poll.records", "50");
        KafkaConsumer<String, String> c = env.consumer(p);
        ConsumerRebalanceListener listener = new ConsumerRebalanceListener() {
            @Override
            public void onPartitionsRevoked(Collection<TopicPartition> revoked) {
                emit("{\"event\":\"revoke\",\"partitions\":" + partitions(revoked) + ",\"owned\":"
                        + partitions(c.assignment()) + "}");
            }

            @Override
            public void onPartitionsAssigned(Collection<TopicPartition> assigned) {
                emit("{\"event\":\"assign\",\"partitions\":" + partitions(assigned) + ",\"owned\":"
                        + partitions(c.assignment()) + "}");
            }
        };
        String subscription = args[3];
        if (subscription.startsWith("regex:")) {
            // server-side regex (SubscriptionPattern, RE2/J): 4.x only, so reflection keeps this module 3.9-buildable
            Class<?> sp = Class.forName("org.apache.kafka.clients.consumer.SubscriptionPattern");
            Object pattern = sp.getConstructor(String.class).newInstance(subscription.substring(6));
            KafkaConsumer.class.getMethod("subscribe", sp, ConsumerRebalanceListener.class).invoke(c, pattern, listener);
        } else {
            c.subscribe(List.of(subscription.substring(6)), listener);
        }
        CountDownLatch closed = new CountDownLatch(1);
        Thread main = Thread.currentThread();
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            c.wakeup();
            try {
                closed.await();
                main.join(30000);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }));
        emit("{\"event\":\"started\",\"pid\":" + ProcessHandle.current().pid() + "}");
        try {
            while (true) {
                var records = c.poll(Duration.ofMillis(100));
                for (ConsumerRecord<String, String> r : records)
                    emit("{\"event\":\"msg\",\"topic\":\"" + r.topic() + "\",\"p\":" + r.partition() + ",\"o\":"
                            + r.offset() + ",\"v\":\"" + r.value() + "\"}");
                if (!records.isEmpty()) {
                    try {
                        c.commitSync();
                        emit("{\"event\":\"committed\"}");
                    } catch (CommitFailedException | RebalanceInProgressException e) {
                        // the member's epoch or generation moved on under the commit (a rebalance): what it read
                        // since its last commit is uncommitted and may be read again by the partition's next owner
                        emit("{\"event\":\"commit_failed\"}");
                    }
                }
            }
        } catch (WakeupException e) {
            // SIGTERM: close() below leaves the group (member epoch -1)
        } finally {
            c.close();
            emit("{\"event\":\"closed\"}");
            closed.countDown();
        }
    }
}
