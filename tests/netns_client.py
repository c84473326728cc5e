"""Client work for the network-partition tests, run inside a network namespace (`ip netns exec <ns> python -m
tests.netns_client ...`): the test process itself stays out of the partitioned network.

  produce BOOTSTRAP TOPIC SECONDS OUT   acks=all, idempotent, values <OUT's stem>-<n>; one line per acknowledged
                                        value in OUT
  consume BOOTSTRAP TOPIC OUT           every value of partition 0 from the start, one per line in OUT
  describe BOOTSTRAP TOPIC              JSON {"leader": N, "isr": [...], "controller": C} of partition 0, as that
                                        broker sees it
  create BOOTSTRAP TOPIC 1,2,3          one partition on those replicas, min.insync.replicas=2
  produce-to BROKER TOPIC VALUE         one acks=all Produce (kio frames) to that broker alone, no redirect;
                                        prints its error code (0: acknowledged)
"""

from __future__ import annotations

import asyncio
import datetime
import json
import sys
import time

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def produce(bootstrap: str, topic: str, seconds: float, out: str) -> None:
    tag = out.rsplit("/", 1)[-1].split(".")[0]
    producer = Producer({
        "bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5,
        "message.timeout.ms": 60000, "request.timeout.ms": 5000, "log_level": 0,
    })  # fmt: skip
    with open(out, "a", buffering=1) as acked:

        def delivered(err: KafkaError | None, msg: object) -> None:
            if err is None:
                acked.write(msg.value().decode() + "\n")  # type: ignore[attr-defined]

        deadline = time.monotonic() + seconds
        i = 0
        while time.monotonic() < deadline:
            producer.produce(topic, f"{tag}-{i:07d}".encode(), partition=0, on_delivery=delivered)
            i += 1
            producer.poll(0.01)
        producer.flush(70)


def consume(bootstrap: str, topic: str, out: str) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "netns-check", "enable.auto.commit": False,
                         "isolation.level": "read_uncommitted", "log_level": 0})  # fmt: skip
    _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)
    consumer.assign([TopicPartition(topic, 0, 0)])
    values = []
    deadline = time.monotonic() + 60
    position = 0
    while position < high and time.monotonic() < deadline:
        msg = consumer.poll(1.0)
        if msg is None or msg.error():
            continue
        values.append(msg.value().decode())
        position = msg.offset() + 1
    consumer.close()
    with open(out, "w") as f:
        f.write("".join(v + "\n" for v in values))


def describe(bootstrap: str, topic: str) -> None:
    try:
        md = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0}).list_topics(topic, timeout=5)
        p = md.topics[topic].partitions[0]
        print(json.dumps({"leader": p.leader, "isr": sorted(p.isrs), "controller": md.controller_id}))
    except Exception as exc:
        print(json.dumps({"error": str(exc)}))


def create(bootstrap: str, topic: str, replicas: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    new = NewTopic(topic, num_partitions=1, replica_assignment=[[int(r) for r in replicas.split(",")]],
                   config={"min.insync.replicas": "2", "unclean.leader.election.enable": "false"})  # fmt: skip
    admin.create_topics([new])[topic].result(30)


def produce_to(broker: str, topic: str, value: str) -> None:
    from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
    from kio.schema.produce.v9.response import ProduceResponse

    from kbus.protocol.client import KafkaConnection
    from kbus.protocol.record_batch import build_batch

    host, port = broker.rsplit(":", 1)
    body = ProduceRequest(
        transactional_id=None, acks=-1, timeout=datetime.timedelta(seconds=10),
        topic_data=(TopicProduceData(name=topic, partition_data=(
            PartitionProduceData(index=0, records=build_batch([(None, value.encode())])),)),),
    )  # fmt: skip

    async def send() -> int:
        conn = KafkaConnection(host, int(port), "netns-produce-to")
        try:
            resp = await conn.request(body, ProduceResponse, timeout=30)
            return int(resp.responses[0].partition_responses[0].error_code)
        finally:
            await conn.close()

    print(asyncio.run(send()))


if __name__ == "__main__":
    command, *args = sys.argv[1:]
    if command == "produce":
        produce(args[0], args[1], float(args[2]), args[3])
    elif command == "consume":
        consume(args[0], args[1], args[2])
    elif command == "produce-to":
        produce_to(args[0], args[1], args[2])
    elif command == "create":
        create(args[0], args[1], args[2])
    elif command == "describe":
        describe(args[0], args[1])
    else:
        raise SystemExit(f"unknown command {command}")
