"""CreatePartitions with explicit replica assignments on a 3-broker cluster (librdkafka's 0081_admin
do_test_CreatePartitions): the new partitions get exactly the replicas the request names, and a bad assignment is
refused with INVALID_REPLICA_ASSIGNMENT, leaving the topic as it was."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from tests.kbus_processes import wait_for


def _replicas(admin: AdminClient, topic: str) -> dict[int, list[int]]:
    md = admin.list_topics(topic, timeout=10).topics[topic]
    return {p: list(pm.replicas) for p, pm in md.partitions.items()}


def test_new_partitions_get_the_requested_replicas_and_bad_ones_are_refused(cluster):
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    topic = "grown"
    admin.create_topics([NewTopic(topic, num_partitions=1, replica_assignment=[[1, 2, 3]])])[topic].result(30)
    refused = [
        (3, [[1, 2, 3]]),  # two new partitions, one assignment
        (2, [[1, 2, 9]]),  # unknown broker
        (2, [[1, 1, 2]]),  # a broker twice
        (2, [[1, 2]]),  # replication factor differs from partition 0's
    ]
    for total, assignment in refused:
        with pytest.raises(KafkaException) as exc:
            admin.create_partitions([NewPartitions(topic, total, replica_assignment=assignment)])[topic].result(30)
        assert exc.value.args[0].code() == KafkaError.INVALID_REPLICA_ASSIGNMENT, (assignment, exc.value)
        assert len(_replicas(admin, topic)) == 1
    wanted = [[3, 2, 1], [1, 2, 3], [2, 3, 1]]
    admin.create_partitions([NewPartitions(topic, 4, replica_assignment=wanted)])[topic].result(30)
    expected = {0: [1, 2, 3], 1: [3, 2, 1], 2: [1, 2, 3], 3: [2, 3, 1]}
    # each broker answers Metadata from its own view and the client may ask any of them: all must agree
    for broker in cluster.brokers.values():
        one = AdminClient({"bootstrap.servers": broker.bootstrap})
        wait_for(lambda one=one: _replicas(one, topic) == expected, timeout=20, what=f"{broker.bootstrap}'s view")
