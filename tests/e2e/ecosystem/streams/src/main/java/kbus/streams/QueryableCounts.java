package kbus.streams;

import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Properties;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyQueryMetadata;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StoreQueryParameters;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.InvalidStateStoreException;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.state.HostInfo;
import org.apache.kafka.streams.state.KeyValueIterator;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.QueryableStoreTypes;
import org.apache.kafka.streams.state.ReadOnlyKeyValueStore;

/**
 * Counts per word with a standby replica of the store and interactive queries: records (key: an id, value: a
 * word) from INPUT, re-keyed by word (a repartition topic), counted in the store "counts" (exactly_once_v2,
 * num.standby.replicas=1), counts to OUTPUT. An HTTP server on PORT (also this instance's application.server)
 * answers GET /counts with one line per word this instance holds, "word count active|standby", read from its
 * local store partitions, standbys included (enableStaleStores): what an instance can answer when the active
 * instance of a key has died and the group has not rebalanced yet. The header Streams-State is the instance's
 * KafkaStreams.State: while REBALANCING a task may be in hand-over (restored by the state updater, recycled between
 * standby and active) and briefly in no store list, so an answer then can lack that task's keys; RUNNING means
 * every assigned task is restored and owned by the stream thread.
 * Usage: QueryableCounts BOOTSTRAP APP_ID INPUT OUTPUT PORT STATE_DIR
 */
public final class QueryableCounts {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], appId = args[1], input = args[2], output = args[3];
        int port = Integer.parseInt(args[4]);
        HostInfo self = new HostInfo("127.0.0.1", port);
        Properties p = new Properties();
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
        p.put(StreamsConfig.APPLICATION_SERVER_CONFIG, self.host() + ":" + port);
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        p.put(StreamsConfig.NUM_STANDBY_REPLICAS_CONFIG, 1);
        p.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 1);
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 200);
        p.put(StreamsConfig.STATE_DIR_CONFIG, Path.of(args[5]).toString());
        p.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        p.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        p.put(StreamsConfig.consumerPrefix("session.timeout.ms"), 6000);
        p.put(StreamsConfig.consumerPrefix("heartbeat.interval.ms"), 1000);

        StreamsBuilder builder = new StreamsBuilder();
        builder.<String, String>stream(input)
                .groupBy((id, word) -> word)
                .count(Materialized.<String, Long, KeyValueStore<Bytes, byte[]>>as("counts"))
                .toStream()
                .mapValues(String::valueOf)
                .to(output, Produced.with(Serdes.String(), Serdes.String()));
        KafkaStreams streams = new KafkaStreams(builder.build(), p);
        streams.setUncaughtExceptionHandler(e -> {
            e.printStackTrace();
            return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });

        HttpServer http = HttpServer.create(new InetSocketAddress(self.host(), port), 0);
        http.createContext("/counts", exchange -> {
            KafkaStreams.State before = streams.state();
            int status = 200;
            StringBuilder body = new StringBuilder();
            try {
                ReadOnlyKeyValueStore<String, Long> store = streams.store(StoreQueryParameters
                        .fromNameAndType("counts", QueryableStoreTypes.<String, Long>keyValueStore())
                        .enableStaleStores());
                try (KeyValueIterator<String, Long> it = store.all()) {
                    while (it.hasNext()) {
                        KeyValue<String, Long> kv = it.next();
                        KeyQueryMetadata where = streams.queryMetadataForKey("counts", kv.key, Serdes.String().serializer());
                        String role = self.equals(where.activeHost()) ? "active" : "standby";
                        body.append(kv.key).append(' ').append(kv.value).append(' ').append(role).append('\n');
                    }
                }
            } catch (InvalidStateStoreException e) {  // rebalancing, or the store not open yet
                status = 503;
                body.append(e.getMessage()).append('\n');
            }
            byte[] bytes = body.toString().getBytes(StandardCharsets.UTF_8);
            // the state before and after reading the stores ("RUNNING" only if it was so on both sides)
            KafkaStreams.State after = streams.state();
            exchange.getResponseHeaders().add("Streams-State", before == after ? after.name() : before + "->" + after);
            exchange.sendResponseHeaders(status, bytes.length);
            try (OutputStream out = exchange.getResponseBody()) {
                out.write(bytes);
            }
        });
        http.start();
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            http.stop(0);
            streams.close(Duration.ofSeconds(30));
        }));
        streams.start();
        Thread.currentThread().join();
    }
}
