"""`kbus share-groups` against Kafka 4's own kafka-share-groups.sh (ShareGroupCommand of kafka-tools 4.x) for the
same command on the same kbus broker: the outputs must be the same bytes (Kafka's tool working against kbus is
itself part of the check). The share group is made with raw frames (tests/integration/test_share_groups.py's
helpers): 2 members, 10 records, 4 of them acknowledged; a second group, empty."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from kbus.protocol.client import KafkaConnection
from tests.e2e.ecosystem import jvm_tmp
from tests.e2e.ecosystem.kafka_jars import default_version, fetch, kbus
from tests.integration.test_consumer_groups import create_topic, produce
from tests.integration.test_share_groups import heartbeat, run, share_fetch, topic_id
from tests.kbus_processes import BrokerProcess

pytestmark = [pytest.mark.integration, pytest.mark.slow]

MAIN = "org.apache.kafka.tools.consumer.group.ShareGroupCommand"


@pytest.fixture(scope="module")
def kafka4_libs() -> Path:
    return fetch(default_version("4"))


def kafka_share_groups(libs: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = ["java", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", *jvm_tmp.session_options(), "-cp",
           f"{libs}/*", MAIN, *args]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    # slf4j's "no binding" notice is not the tool's output
    stderr = "\n".join(line for line in out.stderr.splitlines() if not line.startswith("SLF4J"))
    return subprocess.CompletedProcess(cmd, out.returncode, out.stdout, stderr)


def test_share_groups_cli_matches_kafka(kafka4_libs: Path, broker_factory: Callable[..., BrokerProcess]) -> None:
    # the members never heartbeat again: their sessions must outlast the ~40 JVM runs
    b = broker_factory({"offsets.topic.num.partitions": "1", "group.share.session.timeout.ms": "3600000"})
    topic = create_topic(b.bootstrap, 2, "shtopic")
    m1, m2 = "member-aaaaaaaaaaaaaaaa", "member-bbbbbbbbbbbbbbbb"

    async def setup(conn: KafkaConnection) -> None:
        tid = await topic_id(conn, topic)
        await heartbeat(conn, "sgroup", m1, 0, (topic,))
        await heartbeat(conn, "sgroup", m2, 0, (topic,))
        await share_fetch(conn, "sgroup", m1, 0, tid)
        produce(b.bootstrap, topic, [f"v{i}" for i in range(10)], 1)
        await share_fetch(conn, "sgroup", m1, 1, tid, max_wait_ms=2000)
        await share_fetch(conn, "sgroup", m1, 2, tid, acks=((0, 3, (1,)),), max_records=1)
        await heartbeat(conn, "emptyg", "member-cccc", 0, (topic,))
        await heartbeat(conn, "emptyg", "member-cccc", -1)

    run(b.port, setup)
    bs = ("--bootstrap-server", b.bootstrap)
    for args in (
        ("--list",),
        ("--list", "--state"),
        ("--list", "--state", "Empty"),
        ("--describe", "--group", "sgroup"),
        ("--describe", "--group", "sgroup", "--offsets", "--verbose"),
        ("--describe", "--group", "sgroup", "--members"),
        ("--describe", "--group", "sgroup", "--members", "--verbose"),
        ("--describe", "--group", "sgroup", "--state"),
        ("--describe", "--group", "sgroup", "--state", "--verbose"),
        ("--reset-offsets", "--group", "emptyg", "--topic", topic, "--to-offset", "3", "--dry-run"),
        ("--reset-offsets", "--group", "emptyg", "--all-topics", "--to-latest", "--execute"),
        ("--describe", "--group", "emptyg"),
        ("--reset-offsets", "--group", "emptyg", "--topic", f"{topic}:0", "--to-earliest", "--execute"),
        ("--describe", "--group", "emptyg", "--offsets", "--verbose"),
        ("--reset-offsets", "--group", "sgroup", "--topic", topic, "--to-earliest", "--execute"),
        ("--delete-offsets", "--group", "emptyg", "--topic", topic),
        ("--describe", "--group", "emptyg"),
    ):
        theirs = kafka_share_groups(kafka4_libs, *bs, *args)
        ours = kbus("share-groups", *bs, *args)
        assert ours.stdout == theirs.stdout, (args, ours.stdout, ours.stderr, theirs.stdout)
        assert ours.returncode == theirs.returncode, (args, ours.stderr, theirs.stderr, theirs.returncode)
        if theirs.returncode:
            assert ours.stderr.strip() == theirs.stderr.strip(), args
    # deleting: a group with members is refused, an empty one goes (Kafka's messages; after Kafka's tool deleted
    # emptyg, kbus's finds nothing left to delete, so the two run on groups of their own)
    theirs = kafka_share_groups(kafka4_libs, *bs, "--delete", "--group", "sgroup")
    ours = kbus("share-groups", *bs, "--delete", "--group", "sgroup")
    assert (ours.stdout + ours.stderr).strip() == (theirs.stdout + theirs.stderr).strip(), (ours, theirs)
    assert ours.returncode == theirs.returncode
    theirs = kafka_share_groups(kafka4_libs, *bs, "--delete", "--group", "emptyg")
    assert theirs.stdout == "Deletion of requested share groups ('emptyg') was successful.\n", theirs
    assert kbus("share-groups", *bs, "--list").stdout == "sgroup\n"
