package kbus.compat;

import static kbus.compat.Env.check;
import static kbus.compat.Env.equal;

import java.time.Duration;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.stream.Collectors;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.ConsumerGroupListing;
import org.apache.kafka.clients.admin.CreateTopicsOptions;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.ListOffsetsResult.ListOffsetsResultInfo;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.InvalidConfigurationException;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;

final class AdminChecks {
    private AdminChecks() {}

    static Throwable failure(org.apache.kafka.common.KafkaFuture<?> f) throws InterruptedException {
        try {
            f.get();
            return null;
        } catch (ExecutionException e) {
            return e.getCause();
        }
    }

    /** createTopics (configs, validateOnly, duplicates), listTopics, describeTopics, createPartitions, deleteTopics. */
    static void topics(Env env) throws Exception {
        String topic = env.name("t");
        var admin = env.admin;
        admin.createTopics(List.of(new NewTopic(topic, 2, (short) 1).configs(Map.of("cleanup.policy", "compact")))).all().get();
        check(admin.listTopics().names().get().contains(topic), "listTopics has the new topic");
        TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
        equal(2, d.partitions().size(), "partitions");
        check(d.topicId() != null && !d.topicId().toString().equals("AAAAAAAAAAAAAAAAAAAAAA"), "a topic id: " + d.topicId());
        check(!d.isInternal(), "not internal");
        for (TopicPartitionInfo p : d.partitions()) {
            check(p.leader() != null, "partition " + p.partition() + " has a leader");
            equal(1, p.replicas().size(), "replicas");
            equal(1, p.isr().size(), "isr");
        }
        Throwable dup = failure(admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all());
        check(dup instanceof TopicExistsException, "TopicExistsException for a duplicate, got " + dup);
        String dry = env.name("dry");
        admin.createTopics(List.of(new NewTopic(dry, 1, (short) 1)), new CreateTopicsOptions().validateOnly(true)).all().get();
        check(!admin.listTopics().names().get().contains(dry), "validateOnly created nothing");
        Throwable badName = failure(admin.createTopics(List.of(new NewTopic("bad name!", 1, (short) 1))).all());
        check(badName != null && badName.getClass().getSimpleName().equals("InvalidTopicException"), "InvalidTopicException, got " + badName);
        admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(5))).all().get();
        equal(5, admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic).partitions().size(), "partitions after createPartitions");
        admin.deleteTopics(List.of(topic)).all().get();
        long deadline = System.nanoTime() + Duration.ofSeconds(15).toNanos();
        while (admin.listTopics().names().get().contains(topic)) {
            check(System.nanoTime() < deadline, "deleted topic still listed");
            Thread.sleep(100);
        }
        Throwable gone = failure(admin.describeTopics(List.of(topic)).allTopicNames());
        check(gone instanceof UnknownTopicOrPartitionException, "UnknownTopicOrPartitionException, got " + gone);
    }

    static ConfigEntry entry(Env env, ConfigResource r, String name) throws Exception {
        Config c = env.admin.describeConfigs(List.of(r)).all().get().get(r);
        return c.get(name);
    }

    /** describeConfigs (topic and broker, with sources), incrementalAlterConfigs SET/DELETE, a bad value refused. */
    static void configs(Env env) throws Exception {
        String topic = env.name("t");
        env.createTopic(topic, 1, Map.of("retention.ms", "86400000"));
        ConfigResource r = new ConfigResource(ConfigResource.Type.TOPIC, topic);
        ConfigEntry retention = entry(env, r, "retention.ms");
        equal("86400000", retention.value(), "retention.ms");
        equal(ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG, retention.source(), "retention.ms source");
        ConfigEntry segment = entry(env, r, "segment.bytes");
        equal("1073741824", segment.value(), "segment.bytes default");
        equal(ConfigEntry.ConfigSource.DEFAULT_CONFIG, segment.source(), "segment.bytes source");
        env.admin.incrementalAlterConfigs(Map.of(r, List.of(
                new AlterConfigOp(new ConfigEntry("max.message.bytes", "200000"), AlterConfigOp.OpType.SET),
                new AlterConfigOp(new ConfigEntry("retention.ms", ""), AlterConfigOp.OpType.DELETE)))).all().get();
        ConfigEntry mmb = entry(env, r, "max.message.bytes");
        equal("200000", mmb.value(), "max.message.bytes after SET");
        equal(ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG, mmb.source(), "its source");
        ConfigEntry back = entry(env, r, "retention.ms");
        equal("604800000", back.value(), "retention.ms after DELETE");
        check(back.source() != ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG, "retention.ms no longer a topic override");
        Throwable bad = failure(env.admin.incrementalAlterConfigs(Map.of(r, List.of(
                new AlterConfigOp(new ConfigEntry("retention.ms", "soon"), AlterConfigOp.OpType.SET)))).all());
        check(bad instanceof InvalidConfigurationException, "InvalidConfigurationException for a bad value, got " + bad);
        Collection<Node> nodes = env.admin.describeCluster().nodes().get();
        ConfigResource broker = new ConfigResource(ConfigResource.Type.BROKER, nodes.iterator().next().idString());
        Config bc = env.admin.describeConfigs(List.of(broker)).all().get().get(broker);
        check(bc.get("num.partitions") != null, "broker config num.partitions described");
        check(bc.get("log.retention.hours") != null, "broker config log.retention.hours described");
    }

    /** listOffsets earliest/latest/forTimestamp/maxTimestamp, deleteRecords moving the log start. */
    static void listOffsetsDeleteRecords(Env env) throws Exception {
        String topic = env.name("t");
        env.createTopic(topic, 1, Map.of());
        long base = System.currentTimeMillis() - 100_000;
        KafkaProducer<String, String> producer = env.producer();
        for (int i = 0; i < 20; i++) {
            long ts = i == 12 ? base + 50_000 : base + i;  // record 12 carries the largest timestamp
            producer.send(new ProducerRecord<>(topic, 0, ts, "k", "v" + i));
        }
        producer.flush();
        TopicPartition tp = new TopicPartition(topic, 0);
        var admin = env.admin;
        equal(0L, admin.listOffsets(Map.of(tp, OffsetSpec.earliest())).partitionResult(tp).get().offset(), "earliest");
        equal(20L, admin.listOffsets(Map.of(tp, OffsetSpec.latest())).partitionResult(tp).get().offset(), "latest");
        ListOffsetsResultInfo at = admin.listOffsets(Map.of(tp, OffsetSpec.forTimestamp(base + 5))).partitionResult(tp).get();
        equal(5L, at.offset(), "forTimestamp");
        equal(base + 5, at.timestamp(), "its timestamp");
        ListOffsetsResultInfo max = admin.listOffsets(Map.of(tp, OffsetSpec.maxTimestamp())).partitionResult(tp).get();
        equal(12L, max.offset(), "maxTimestamp offset");
        equal(base + 50_000, max.timestamp(), "maxTimestamp");
        long low = admin.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(7))).lowWatermarks().get(tp).get().lowWatermark();
        equal(7L, low, "low watermark after deleteRecords");
        equal(7L, admin.listOffsets(Map.of(tp, OffsetSpec.earliest())).partitionResult(tp).get().offset(), "earliest after deleteRecords");
        Throwable beyond = failure(admin.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(30))).all());
        check(beyond != null && beyond.getClass().getSimpleName().equals("OffsetOutOfRangeException"), "OffsetOutOfRangeException, got " + beyond);
    }

    /** describeCluster: the broker as a node with its host and port, a controller, a cluster id. */
    static void describeCluster(Env env) throws Exception {
        DescribeClusterResult r = env.admin.describeCluster();
        Collection<Node> nodes = r.nodes().get();
        equal(1, nodes.size(), "nodes");
        Node n = nodes.iterator().next();
        equal(env.bootstrap, n.host() + ":" + n.port(), "the node's address");
        Node controller = r.controller().get();
        check(controller != null && !controller.isEmpty(), "a controller: " + controller);
        String id = r.clusterId().get();
        check(id != null && id.length() == 22, "a 22-character cluster id: " + id);
    }

    /** list/describe/delete groups, list/alter/delete consumer group offsets. */
    @SuppressWarnings("deprecation")
    static void consumerGroups(Env env) throws Exception {
        String topic = env.name("t");
        String group = env.name("g");
        env.createTopic(topic, 2, Map.of());
        ConsumerChecks.produce(env, topic, 10);
        KafkaConsumer<String, String> c = env.consumer(env.consumerProps(group));
        c.subscribe(List.of(topic));
        Env.pollAtLeast(c, 10, Duration.ofSeconds(30));
        c.commitSync();
        var admin = env.admin;
        Set<String> listed = admin.listConsumerGroups().all().get().stream().map(ConsumerGroupListing::groupId).collect(Collectors.toSet());
        check(listed.contains(group), "listConsumerGroups has the group");
        ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(group)).all().get().get(group);
        equal("Stable", d.state().toString(), "state");
        equal(1, d.members().size(), "members");
        equal(2, d.members().iterator().next().assignment().topicPartitions().size(), "member's assignment");
        equal("range", d.partitionAssignor(), "assignor");
        check(!d.isSimpleConsumerGroup(), "not a simple group");
        Map<TopicPartition, OffsetAndMetadata> offsets = admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
        equal(10L, offsets.values().stream().mapToLong(OffsetAndMetadata::offset).sum(), "committed offsets");
        TopicPartition tp0 = new TopicPartition(topic, 0);
        TopicPartition tp1 = new TopicPartition(topic, 1);
        Throwable busy = failure(admin.alterConsumerGroupOffsets(group, Map.of(tp0, new OffsetAndMetadata(0))).all());
        check(busy != null && busy.getClass().getSimpleName().equals("UnknownMemberIdException"), "UnknownMemberIdException while active, got " + busy);
        c.close();
        equal("Empty", admin.describeConsumerGroups(List.of(group)).all().get().get(group).state().toString(), "state after close");
        admin.alterConsumerGroupOffsets(group, Map.of(tp0, new OffsetAndMetadata(0))).all().get();
        equal(0L, admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get().get(tp0).offset(), "offset after alter");
        admin.deleteConsumerGroupOffsets(group, Set.of(tp1)).all().get();
        check(!admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get().containsKey(tp1), "deleted offset gone");
        admin.deleteConsumerGroups(List.of(group)).all().get();
        Set<String> after = admin.listConsumerGroups().all().get().stream().map(ConsumerGroupListing::groupId).collect(Collectors.toSet());
        check(!after.contains(group), "deleted group not listed");
    }

    /** describeLogDirs (the partition's dir and size), describeProducers (an idempotent producer's state),
     *  electLeaders (a preferred leader that already leads), describeFeatures. */
    static void logDirsProducersElection(Env env) throws Exception {
        String topic = env.name("t");
        env.createTopic(topic, 1, Map.of());
        java.util.Properties p = env.producerProps();
        p.put(org.apache.kafka.clients.producer.ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        KafkaProducer<String, String> producer = env.producer(p);
        for (int i = 0; i < 5; i++) producer.send(new ProducerRecord<>(topic, "k", "v" + i));
        producer.flush();
        TopicPartition tp = new TopicPartition(topic, 0);
        var admin = env.admin;
        int broker = admin.describeCluster().nodes().get().iterator().next().id();
        var dirs = admin.describeLogDirs(List.of(broker)).allDescriptions().get().get(broker);
        check(dirs != null && !dirs.isEmpty(), "log dirs described");
        boolean found = false;
        for (var d : dirs.values()) {
            var info = d.replicaInfos().get(tp);
            if (info != null) {
                found = true;
                check(info.size() > 0, "partition size in its log dir: " + info.size());
            }
        }
        check(found, "the partition is in a described log dir");
        var producers = admin.describeProducers(List.of(tp)).partitionResult(tp).get().activeProducers();
        equal(1, producers.size(), "active producers");
        equal(4, producers.get(0).lastSequence(), "the producer's last sequence");
        Throwable e = failure(admin.electLeaders(org.apache.kafka.common.ElectionType.PREFERRED, Set.of(tp)).partitions()
                .thenApply(m -> m.get(tp).orElse(null)).thenApply(x -> {
                    if (x != null) throw new RuntimeException(x);
                    return null;
                }));
        check(e != null && String.valueOf(e).contains("ElectionNotNeeded"), "ElectionNotNeeded, got " + e);
        admin.describeFeatures().featureMetadata().get();  // answered (from ApiVersions)
    }
}
