"""KIP-951 in a 3-broker cluster: a Produce v10+ sent to a broker that does not lead the partition is answered
NOT_LEADER_OR_FOLLOWER with the current leader and epoch and the leader's endpoint, so the client can go there
without refreshing its metadata."""

from __future__ import annotations

import datetime
import uuid

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.produce.v12 import request as v12
from kio.schema.produce.v12.response import ProduceResponse
from kio.schema.types import TopicName
from kio.static.primitive import i16, i32

from kbus.protocol.record_batch import build_batch
from tests.group_member import wait_until
from tests.kbus_processes import Cluster
from tests.txn_forgery import call

pytestmark = [pytest.mark.zookeeper, pytest.mark.integration, pytest.mark.slow]


def test_not_leader_answers_with_the_leader(cluster: Cluster) -> None:
    topic = f"hint-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 2)])[topic].result(20)
    # the leader from the metadata that showed the partition with one (a second Metadata call can time out on a busy
    # machine); a partition shown before its election has leader -1, which no broker's answer names
    leader, _isr = wait_until(lambda: (s := cluster.partitions(topic).get(0)) and s[0] >= 0 and s, 30, "a leader")
    other = next(b for i, b in cluster.brokers.items() if i != leader)
    request = v12.ProduceRequest(transactional_id=None, acks=i16(-1), timeout=datetime.timedelta(seconds=5),
                                 topic_data=(v12.TopicProduceData(name=TopicName(topic), partition_data=(
                                     v12.PartitionProduceData(index=i32(0), records=build_batch([(None, b"v")])),)),))
    r = call(other.bootstrap, request, ProduceResponse)
    p = r.responses[0].partition_responses[0]
    assert p.error_code.name == "not_leader_or_follower"
    assert p.current_leader.leader_id == leader and p.current_leader.leader_epoch >= 0
    host, port = cluster.brokers[leader].bootstrap.split(":")
    assert [(n.node_id, n.host, n.port) for n in r.node_endpoints] == [(leader, host, int(port))]
    # the leader itself takes the write
    ok = call(cluster.brokers[leader].bootstrap, request, ProduceResponse)
    assert ok.responses[0].partition_responses[0].error_code.name == "none" and ok.node_endpoints == ()
