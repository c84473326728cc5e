"""Kafka 3.9's broker keys that no KafkaConfig field parses (a generated table, 250-odd keys): each with its
ConfigDef type, Kafka's default and whether Kafka changes it dynamically. kbus accepts them, shows them in
DescribeConfigs and the start banner, and warns that it ignores them; the TLS, SASL and ZooKeeper security ones
among them are read from the raw properties (kbus.common.broker_config's SECURITY_KEYS)."""

from __future__ import annotations

import enum
from dataclasses import dataclass


# ---- Kafka's other broker keys ----------------------------------------------------------------------------------
class ConfigType(enum.IntEnum):
    """DescribeConfigs' config_type (KIP-569), Kafka's ConfigDef.Type."""

    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


BOOLEAN, STRING, INT, SHORT, LONG, DOUBLE, LIST, CLASS, PASSWORD = ConfigType


@dataclass(frozen=True)
class OtherBrokerConfig:
    """A key of Kafka 3.9's KafkaConfig that no KafkaConfig field above parses: its type, Kafka's default (None:
    null) and whether Kafka's DynamicBrokerConfig lets AlterConfigs change it. The SECURITY_KEYS among them are
    read by kbus.server.security from the raw properties; kbus does not act on any other (docs/operations.md
    lists them): it accepts them, shows them in DescribeConfigs and the start banner as Kafka does, and warns that
    it ignores them when server.properties sets one."""

    type: ConfigType
    default: str | None
    dynamic: bool = False


def _other(name: str, type: ConfigType, default: str | None) -> tuple[str, OtherBrokerConfig]:
    return name, OtherBrokerConfig(type, default)


def _dyn(name: str, type: ConfigType, default: str | None) -> tuple[str, OtherBrokerConfig]:
    return name, OtherBrokerConfig(type, default, dynamic=True)


# Generated from Kafka 3.9.2's DescribeConfigs of a broker (315 keys) minus the fields above; `_dyn` for the keys
# it reports as not read-only (DynamicBrokerConfig.AllDynamicConfigs).
OTHER_BROKER_CONFIGS: dict[str, OtherBrokerConfig] = dict([
    _other('alter.config.policy.class.name', CLASS, None),
    _other('alter.config.policy.kraft.compatibility.enable', BOOLEAN, 'false'),
    _other('alter.log.dirs.replication.quota.window.num', INT, '11'),
    _other('alter.log.dirs.replication.quota.window.size.seconds', INT, '1'),
    _other('auto.include.jmx.reporter', BOOLEAN, 'true'),
    _other('broker.heartbeat.interval.ms', INT, '2000'),
    _other('broker.id.generation.enable', BOOLEAN, 'true'),
    _other('broker.session.timeout.ms', INT, '9000'),
    _other('client.quota.callback.class', CLASS, None),
    _other('connection.failed.authentication.delay.ms', INT, '100'),
    _other('connections.max.reauth.ms', LONG, '0'),
    _other('control.plane.listener.name', STRING, None),
    _other('controlled.shutdown.max.retries', INT, '3'),
    _other('controlled.shutdown.retry.backoff.ms', LONG, '5000'),
    _other('controller.listener.names', STRING, None),
    _other('controller.quorum.append.linger.ms', INT, '25'),
    _other('controller.quorum.bootstrap.servers', LIST, ''),
    _other('controller.quorum.election.backoff.max.ms', INT, '1000'),
    _other('controller.quorum.election.timeout.ms', INT, '1000'),
    _other('controller.quorum.fetch.timeout.ms', INT, '2000'),
    _other('controller.quorum.request.timeout.ms', INT, '2000'),
    _other('controller.quorum.retry.backoff.ms', INT, '20'),
    _other('controller.quorum.voters', LIST, ''),
    _other('controller.socket.timeout.ms', INT, '30000'),
    _other('create.topic.policy.class.name', CLASS, None),
    _other('delegation.token.expiry.check.interval.ms', LONG, '3600000'),
    _other('delegation.token.expiry.time.ms', LONG, '86400000'),
    _other('delegation.token.master.key', PASSWORD, None),
    _other('delegation.token.max.lifetime.ms', LONG, '604800000'),
    _other('delegation.token.secret.key', PASSWORD, None),
    _other('delete.records.purgatory.purge.interval.requests', INT, '1'),
    _other('early.start.listeners', STRING, None),
    _other('eligible.leader.replicas.enable', BOOLEAN, 'false'),
    _other('fetch.purgatory.purge.interval.requests', INT, '1000'),
    _other('group.consumer.max.heartbeat.interval.ms', INT, '15000'),
    _other('group.consumer.max.session.timeout.ms', INT, '60000'),
    _other('group.consumer.min.heartbeat.interval.ms', INT, '5000'),
    _other('group.consumer.min.session.timeout.ms', INT, '45000'),
    _other('group.coordinator.append.linger.ms', INT, '10'),
    _other('group.coordinator.threads', INT, '1'),
    _other('group.share.max.heartbeat.interval.ms', INT, '15000'),
    _other('group.share.max.record.lock.duration.ms', INT, '60000'),
    _other('group.share.max.session.timeout.ms', INT, '60000'),
    _other('group.share.min.heartbeat.interval.ms', INT, '5000'),
    _other('group.share.min.record.lock.duration.ms', INT, '15000'),
    _other('group.share.min.session.timeout.ms', INT, '45000'),
    _other('initial.broker.registration.timeout.ms', INT, '60000'),
    _other('inter.broker.protocol.version', STRING, '3.9-IV0'),
    _other('kafka.metrics.polling.interval.secs', INT, '10'),
    _other('kafka.metrics.reporters', LIST, ''),
    _dyn('log.cleaner.dedupe.buffer.size', LONG, '134217728'),
    _dyn('log.cleaner.io.buffer.load.factor', DOUBLE, '0.9'),
    _dyn('log.cleaner.io.buffer.size', INT, '524288'),
    _dyn('log.cleaner.io.max.bytes.per.second', DOUBLE, '1.7976931348623157E308'),
    _other('log.dir.failure.timeout.ms', LONG, '30000'),
    _other('log.flush.start.offset.checkpoint.interval.ms', INT, '60000'),
    _other('max.request.partition.size.limit', INT, '2000'),
    _other('metadata.log.dir', STRING, None),
    _other('metadata.log.max.record.bytes.between.snapshots', LONG, '20971520'),
    _other('metadata.log.max.snapshot.interval.ms', LONG, '3600000'),
    _other('metadata.log.segment.bytes', INT, '1073741824'),
    _other('metadata.log.segment.ms', LONG, '604800000'),
    _other('metadata.max.idle.interval.ms', INT, '500'),
    _other('metadata.max.retention.bytes', LONG, '104857600'),
    _other('metadata.max.retention.ms', LONG, '604800000'),
    _dyn('metric.reporters', LIST, ''),
    _other('metrics.num.samples', INT, '2'),
    _other('metrics.recording.level', STRING, 'INFO'),
    _other('metrics.sample.window.ms', LONG, '30000'),
    _other('node.id', INT, '-1'),
    _other('num.replica.alter.log.dirs.threads', INT, None),
    _other('offsets.commit.required.acks', SHORT, '-1'),
    _other('offsets.load.buffer.size', INT, '5242880'),
    _other('offsets.topic.compression.codec', INT, '0'),
    _other('password.encoder.cipher.algorithm', STRING, 'AES/CBC/PKCS5Padding'),
    _other('password.encoder.iterations', INT, '4096'),
    _other('password.encoder.key.length', INT, '128'),
    _other('password.encoder.keyfactory.algorithm', STRING, None),
    _other('password.encoder.old.secret', PASSWORD, None),
    _other('password.encoder.secret', PASSWORD, None),
    _dyn('principal.builder.class', CLASS,
         'org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder'),
    _dyn('producer.id.expiration.ms', INT, '86400000'),
    _other('producer.purgatory.purge.interval.requests', INT, '1000'),
    _other('queued.max.request.bytes', LONG, '-1'),
    _other('queued.max.requests', INT, '500'),
    _dyn('remote.fetch.max.wait.ms', INT, '500'),
    _dyn('remote.log.index.file.cache.total.size.bytes', LONG, '1073741824'),
    _other('remote.log.manager.copier.thread.pool.size', INT, '-1'),
    _dyn('remote.log.manager.copy.max.bytes.per.second', LONG, '9223372036854775807'),
    _other('remote.log.manager.copy.quota.window.num', INT, '11'),
    _other('remote.log.manager.copy.quota.window.size.seconds', INT, '1'),
    _other('remote.log.manager.expiration.thread.pool.size', INT, '-1'),
    _dyn('remote.log.manager.fetch.max.bytes.per.second', LONG, '9223372036854775807'),
    _other('remote.log.manager.fetch.quota.window.num', INT, '11'),
    _other('remote.log.manager.fetch.quota.window.size.seconds', INT, '1'),
    _other('remote.log.manager.task.interval.ms', LONG, '30000'),
    _other('remote.log.manager.thread.pool.size', INT, '10'),
    _other('remote.log.metadata.custom.metadata.max.bytes', INT, '128'),
    _other('remote.log.metadata.manager.class.name', STRING,
           'org.apache.kafka.server.log.remote.metadata.storage.TopicBasedRemoteLogMetadataManager'),
    _other('remote.log.metadata.manager.class.path', STRING, None),
    _other('remote.log.metadata.manager.impl.prefix', STRING, 'rlmm.config.'),
    _other('remote.log.metadata.manager.listener.name', STRING, None),
    _other('remote.log.reader.max.pending.tasks', INT, '100'),
    _other('remote.log.reader.threads', INT, '10'),
    _other('remote.log.storage.manager.class.name', STRING, None),
    _other('remote.log.storage.manager.class.path', STRING, None),
    _other('remote.log.storage.manager.impl.prefix', STRING, 'rsm.config.'),
    _other('remote.log.storage.system.enable', BOOLEAN, 'false'),
    _other('replica.fetch.backoff.ms', INT, '1000'),
    _other('replica.fetch.min.bytes', INT, '1'),
    _other('replica.fetch.response.max.bytes', INT, '10485760'),
    _other('replica.selector.class', STRING, None),
    _other('replica.socket.receive.buffer.bytes', INT, '65536'),
    _other('replica.socket.timeout.ms', INT, '30000'),
    _other('reserved.broker.max.id', INT, '1000'),
    _other('sasl.client.callback.handler.class', CLASS, None),
    _dyn('sasl.enabled.mechanisms', LIST, 'GSSAPI'),
    _dyn('sasl.jaas.config', PASSWORD, None),
    _dyn('sasl.kerberos.kinit.cmd', STRING, '/usr/bin/kinit'),
    _dyn('sasl.kerberos.min.time.before.relogin', LONG, '60000'),
    _dyn('sasl.kerberos.principal.to.local.rules', LIST, 'DEFAULT'),
    _dyn('sasl.kerberos.service.name', STRING, None),
    _dyn('sasl.kerberos.ticket.renew.jitter', DOUBLE, '0.05'),
    _dyn('sasl.kerberos.ticket.renew.window.factor', DOUBLE, '0.8'),
    _other('sasl.login.callback.handler.class', CLASS, None),
    _other('sasl.login.class', CLASS, None),
    _other('sasl.login.connect.timeout.ms', INT, None),
    _other('sasl.login.read.timeout.ms', INT, None),
    _dyn('sasl.login.refresh.buffer.seconds', SHORT, '300'),
    _dyn('sasl.login.refresh.min.period.seconds', SHORT, '60'),
    _dyn('sasl.login.refresh.window.factor', DOUBLE, '0.8'),
    _dyn('sasl.login.refresh.window.jitter', DOUBLE, '0.05'),
    _other('sasl.login.retry.backoff.max.ms', LONG, '10000'),
    _other('sasl.login.retry.backoff.ms', LONG, '100'),
    _other('sasl.mechanism.controller.protocol', STRING, 'GSSAPI'),
    _dyn('sasl.mechanism.inter.broker.protocol', STRING, 'GSSAPI'),
    _other('sasl.oauthbearer.clock.skew.seconds', INT, '30'),
    _other('sasl.oauthbearer.expected.audience', LIST, None),
    _other('sasl.oauthbearer.expected.issuer', STRING, None),
    _other('sasl.oauthbearer.jwks.endpoint.refresh.ms', LONG, '3600000'),
    _other('sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms', LONG, '10000'),
    _other('sasl.oauthbearer.jwks.endpoint.retry.backoff.ms', LONG, '100'),
    _other('sasl.oauthbearer.jwks.endpoint.url', STRING, None),
    _other('sasl.oauthbearer.scope.claim.name', STRING, 'scope'),
    _other('sasl.oauthbearer.sub.claim.name', STRING, 'sub'),
    _other('sasl.oauthbearer.token.endpoint.url', STRING, None),
    _other('sasl.server.callback.handler.class', CLASS, None),
    _other('sasl.server.max.receive.size', INT, '524288'),
    _other('security.providers', STRING, None),
    _other('socket.connection.setup.timeout.max.ms', LONG, '30000'),
    _other('socket.connection.setup.timeout.ms', LONG, '10000'),
    _other('socket.listen.backlog.size', INT, '50'),
    _other('ssl.allow.dn.changes', BOOLEAN, 'false'),
    _other('ssl.allow.san.changes', BOOLEAN, 'false'),
    _dyn('ssl.cipher.suites', LIST, ''),
    _dyn('ssl.client.auth', STRING, 'none'),
    _dyn('ssl.enabled.protocols', LIST, 'TLSv1.2,TLSv1.3'),
    _dyn('ssl.endpoint.identification.algorithm', STRING, 'https'),
    _dyn('ssl.engine.factory.class', CLASS, None),
    _dyn('ssl.key.password', PASSWORD, None),
    _dyn('ssl.keymanager.algorithm', STRING, 'SunX509'),
    _dyn('ssl.keystore.certificate.chain', PASSWORD, None),
    _dyn('ssl.keystore.key', PASSWORD, None),
    _dyn('ssl.keystore.location', STRING, None),
    _dyn('ssl.keystore.password', PASSWORD, None),
    _dyn('ssl.keystore.type', STRING, 'JKS'),
    _other('ssl.principal.mapping.rules', STRING, 'DEFAULT'),
    _dyn('ssl.protocol', STRING, 'TLSv1.3'),
    _dyn('ssl.provider', STRING, None),
    _dyn('ssl.secure.random.implementation', STRING, None),
    _dyn('ssl.trustmanager.algorithm', STRING, 'PKIX'),
    _dyn('ssl.truststore.certificates', PASSWORD, None),
    _dyn('ssl.truststore.location', STRING, None),
    _dyn('ssl.truststore.password', PASSWORD, None),
    _dyn('ssl.truststore.type', STRING, 'JKS'),
    _other('telemetry.max.bytes', INT, '1048576'),
    _other('transaction.state.log.load.buffer.size', INT, '5242880'),
    _other('zookeeper.clientCnxnSocket', STRING, None),
    _other('zookeeper.max.in.flight.requests', INT, '10'),
    _other('zookeeper.metadata.migration.enable', BOOLEAN, 'false'),
    _other('zookeeper.set.acl', BOOLEAN, 'false'),
    _other('zookeeper.ssl.cipher.suites', LIST, None),
    _other('zookeeper.ssl.client.enable', BOOLEAN, 'false'),
    _other('zookeeper.ssl.crl.enable', BOOLEAN, 'false'),
    _other('zookeeper.ssl.enabled.protocols', LIST, None),
    _other('zookeeper.ssl.endpoint.identification.algorithm', STRING, 'HTTPS'),
    _other('zookeeper.ssl.keystore.location', STRING, None),
    _other('zookeeper.ssl.keystore.password', PASSWORD, None),
    _other('zookeeper.ssl.keystore.type', STRING, None),
    _other('zookeeper.ssl.ocsp.enable', BOOLEAN, 'false'),
    _other('zookeeper.ssl.protocol', STRING, 'TLSv1.2'),
    _other('zookeeper.ssl.truststore.location', STRING, None),
    _other('zookeeper.ssl.truststore.password', PASSWORD, None),
    _other('zookeeper.ssl.truststore.type', STRING, None),
])
