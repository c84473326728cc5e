"""The ToolRunner JVM (tests/e2e/ecosystem/kafka_jars.py) answers as the tool's own JVM does: the same exit status,
stdout and stderr for a success, a failure the tool reports, a usage error and Kafka 2.8's --zookeeper path; one
call's output never in another's; a call past its timeout raises TimeoutExpired and the next call gets a new JVM."""

from __future__ import annotations

import re
import subprocess
import uuid

import pytest

from tests.e2e.ecosystem import kafka_jars
from tests.e2e.ecosystem.kafka_jars import KafkaDistribution
from tests.kbus_processes import BrokerProcess, free_port

pytestmark = [pytest.mark.integration, pytest.mark.zookeeper]

LOG_TIME = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}\] ", re.M)
# a logged exception's frames: below the tool's main they are the runner's (reflection, ToolRunner.run)
FRAMES = re.compile(r"^\t(at |\.\.\. \d+ more).*\n", re.M)


def comparable(out: subprocess.CompletedProcess[str]) -> tuple[int, str, str]:
    """Status, stdout and stderr without log lines' times and stack frames."""
    return out.returncode, out.stdout, FRAMES.sub("", LOG_TIME.sub("", out.stderr))


def own_jvm(dist: KafkaDistribution, script: str, *args: str) -> tuple[int, str, str]:
    return comparable(subprocess.run(dist.command(script, *args), capture_output=True, text=True, timeout=120))


def in_runner(dist: KafkaDistribution, script: str, *args: str) -> tuple[int, str, str]:
    return comparable(dist.run(script, *args))


def test_tools_answer_in_the_runner_as_in_their_own_jvm(
    kafka39: KafkaDistribution, kafka28: KafkaDistribution, broker: BrokerProcess, zk_connect: str
) -> None:
    topic = f"runner-{uuid.uuid4().hex[:8]}"
    bs = ("--bootstrap-server", broker.bootstrap)
    created = in_runner(kafka39, "kafka-topics", *bs, "--create", "--topic", topic, "--partitions", "2")
    assert created == (0, f"Created topic {topic}.\n", "")
    calls = [
        (kafka39, "kafka-topics", *bs, "--describe", "--topic", topic),
        # a failure the tool reports (its error line and the logged exception on stderr), status 1
        (kafka39, "kafka-topics", *bs, "--create", "--topic", topic, "--partitions", "1"),
        (kafka39, "kafka-configs", *bs, "--describe", "--entity-type", "topics", "--entity-name", topic),
        # a usage error: joptsimple's message and the usage, then Exit.exit(1)
        (kafka39, "kafka-configs", *bs, "--no-such-option"),
        (kafka39, "kafka-topics", "--version"),
        (kafka28, "kafka-topics", "--zookeeper", zk_connect, "--list"),
        (kafka28, "kafka-configs", "--zookeeper", zk_connect, "--describe", "--entity-type", "users"),
    ]
    for dist, script, *args in calls:
        theirs = own_jvm(dist, script, *args)
        assert in_runner(dist, script, *args) == theirs, (script, args)
    assert in_runner(kafka39, "kafka-topics", *bs, "--create", "--topic", topic, "--partitions", "1")[0] == 1
    # the runners used above were the scope's: one JVM for each version
    scope = kafka_jars._scope
    assert scope is not None and sorted(scope.runners) == sorted([kafka39.libs, kafka28.libs])


def test_a_call_past_its_timeout_ends_the_runner_and_the_next_gets_another(
    kafka39: KafkaDistribution, broker: BrokerProcess
) -> None:
    topic = f"runner-{uuid.uuid4().hex[:8]}"
    bs = ("--bootstrap-server", broker.bootstrap)
    assert kafka39.run("kafka-topics", *bs, "--create", "--topic", topic).returncode == 0
    scope = kafka_jars._scope
    assert scope is not None
    first = scope.runners[kafka39.libs]
    # nothing listens there: the admin client retries until its own 60 s timeout, past the call's
    with pytest.raises(subprocess.TimeoutExpired):
        kafka39.run("kafka-topics", "--bootstrap-server", f"127.0.0.1:{free_port()}", "--list", timeout=3)
    assert first.proc.poll() is not None
    again = kafka39.run("kafka-topics", *bs, "--list")
    assert again.returncode == 0 and topic in again.stdout.split(), again
    assert scope.runners[kafka39.libs] is not first
