package kbus.compat;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/** One check's broker, names and clients; everything it opens is closed with it. */
final class Env implements AutoCloseable {
    final String bootstrap;
    final String prefix;
    final Admin admin;
    private final List<AutoCloseable> opened = new ArrayList<>();

    /** Client settings every client of a run gets (security.protocol, sasl.*, ssl.*): the file named by the
     *  system property kbus.client.config, if any. */
    static final Properties CLIENT_CONFIG = loadClientConfig();

    static Properties loadClientConfig() {
        Properties p = new Properties();
        String path = System.getProperty("kbus.client.config");
        if (path != null) {
            try (var in = java.nio.file.Files.newInputStream(java.nio.file.Path.of(path))) {
                p.load(in);
            } catch (java.io.IOException e) {
                throw new java.io.UncheckedIOException(e);
            }
        }
        return p;
    }

    Env(String bootstrap, String prefix) {
        this.bootstrap = bootstrap;
        this.prefix = prefix;
        Properties p = new Properties();
        p.putAll(CLIENT_CONFIG);
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        this.admin = Admin.create(p);
    }

    String name(String what) {
        return "jv-" + prefix + "-" + what;
    }

    void createTopic(String topic, int partitions, Map<String, String> configs) throws Exception {
        admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 1).configs(configs))).all().get();
    }

    Properties producerProps() {
        Properties p = new Properties();
        p.putAll(CLIENT_CONFIG);
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "30000");
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        return p;
    }

    KafkaProducer<String, String> producer(Properties p) {
        return track(new KafkaProducer<>(p, new StringSerializer(), new StringSerializer()));
    }

    KafkaProducer<String, String> producer() {
        return producer(producerProps());
    }

    Properties consumerProps(String group) {
        Properties p = new Properties();
        p.putAll(CLIENT_CONFIG);
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        if (group != null) p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "10000");
        p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "500");
        p.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        p.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        return p;
    }

    KafkaConsumer<String, String> consumer(Properties p) {
        return track(new KafkaConsumer<>(p, new StringDeserializer(), new StringDeserializer()));
    }

    <T extends AutoCloseable> T track(T c) {
        opened.add(c);
        return c;
    }

    /** Polls until {@code n} records arrived (or fails after {@code timeout}). */
    static List<ConsumerRecord<String, String>> pollAtLeast(KafkaConsumer<String, String> c, int n, Duration timeout) {
        List<ConsumerRecord<String, String>> got = new ArrayList<>();
        long deadline = System.nanoTime() + timeout.toNanos();
        while (got.size() < n) {
            if (System.nanoTime() > deadline) throw new AssertionError("got " + got.size() + " of " + n + " records");
            c.poll(Duration.ofMillis(200)).forEach(got::add);
        }
        return got;
    }

    static void check(boolean ok, String what) {
        if (!ok) throw new AssertionError(what);
    }

    static void equal(Object expected, Object actual, String what) {
        if (expected == null ? actual != null : !expected.equals(actual))
            throw new AssertionError(what + ": expected " + expected + ", got " + actual);
    }

    @Override
    public void close() {
        for (int i = opened.size() - 1; i >= 0; i--) {
            try {
                opened.get(i).close();
            } catch (Exception ignored) {
                // already closed by the check
            }
        }
        admin.close(Duration.ofSeconds(5));
    }
}
