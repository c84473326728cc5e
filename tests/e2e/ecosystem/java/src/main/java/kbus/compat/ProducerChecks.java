package kbus.compat;

import static kbus.compat.Env.check;
import static kbus.compat.Env.equal;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.RecordTooLargeException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeaders;

final class ProducerChecks {
    private ProducerChecks() {}

    /** acks=all, idempotence, every codec, headers: each record comes back intact, in order per partition. */
    static void ackAllIdempotentCompressionHeaders(Env env) throws Exception {
        String topic = env.name("t");
        env.createTopic(topic, 3, Map.of());
        List<String> codecs = List.of("none", "gzip", "snappy", "lz4", "zstd");
        Map<String, String> expected = new HashMap<>();
        for (String codec : codecs) {
            Properties p = env.producerProps();
            p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
            p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec);
            p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
            p.put(ProducerConfig.MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION, "5");
            try (KafkaProducer<String, String> producer = env.producer(p)) {
                List<Future<RecordMetadata>> sent = new ArrayList<>();
                for (int i = 0; i < 60; i++) {
                    String key = codec + "-" + i;
                    String value = "value " + i + " " + "x".repeat(i * 10);
                    RecordHeaders headers = new RecordHeaders();
                    headers.add("codec", codec.getBytes(StandardCharsets.UTF_8));
                    headers.add("i", Integer.toString(i).getBytes(StandardCharsets.UTF_8));
                    sent.add(producer.send(new ProducerRecord<>(topic, null, key, value, headers)));
                    expected.put(key, value);
                }
                producer.flush();
                for (Future<RecordMetadata> f : sent) {
                    RecordMetadata md = f.get();
                    check(md.hasOffset() && md.offset() >= 0, "acknowledged with an offset");
                }
            }
        }
        KafkaConsumer<String, String> consumer = env.consumer(env.consumerProps(null));
        List<TopicPartition> tps = List.of(new TopicPartition(topic, 0), new TopicPartition(topic, 1), new TopicPartition(topic, 2));
        consumer.assign(tps);
        consumer.seekToBeginning(tps);
        List<ConsumerRecord<String, String>> got = Env.pollAtLeast(consumer, expected.size(), Duration.ofSeconds(30));
        equal(expected.size(), got.size(), "records read back");
        Map<TopicPartition, Long> lastOffset = new HashMap<>();
        for (ConsumerRecord<String, String> r : got) {
            equal(expected.get(r.key()), r.value(), "value of " + r.key());
            String codec = r.key().substring(0, r.key().indexOf('-'));
            Header h = r.headers().lastHeader("codec");
            check(h != null, "codec header present on " + r.key());
            equal(codec, new String(h.value(), StandardCharsets.UTF_8), "codec header");
            equal(r.key().substring(codec.length() + 1), new String(r.headers().lastHeader("i").value(), StandardCharsets.UTF_8), "i header");
            TopicPartition tp = new TopicPartition(r.topic(), r.partition());
            Long prev = lastOffset.put(tp, r.offset());
            check(prev == null || prev + 1 == r.offset(), "consecutive offsets in " + tp);
        }
    }

    /** A record over max.message.bytes is refused with RECORD_TOO_LARGE; the producer goes on working. */
    static void errors(Env env) throws Exception {
        String topic = env.name("t");
        env.createTopic(topic, 1, Map.of("max.message.bytes", "2000"));
        KafkaProducer<String, String> producer = env.producer();
        try {
            producer.send(new ProducerRecord<>(topic, "big", "y".repeat(5000))).get();
            throw new AssertionError("an oversized record was accepted");
        } catch (ExecutionException e) {
            check(e.getCause() instanceof RecordTooLargeException, "RecordTooLargeException, got " + e.getCause());
        }
        RecordMetadata md = producer.send(new ProducerRecord<>(topic, "small", "ok")).get();
        equal(0L, md.offset(), "offset of the next record");
    }
}
