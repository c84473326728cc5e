"""kafka-topics --describe layout, and the command's option checks (no broker needed)."""

from typer.testing import CliRunner

from kbus.admin.models import PartitionDescription, TopicDescription
from kbus.cli.commands import app
from kbus.cli.topics import format_partition_line, format_topic_line, parse_replica_assignment

runner = CliRunner()


def test_describe_layout() -> None:
    t = TopicDescription(
        name="t",
        topic_id="NPmZHyhbR9y00wMglMH2sg",
        partitions=[PartitionDescription(0, 1, [1, 2], [1]), PartitionDescription(1, None, [2, 1], [])],
        configs={"retention.ms": "1000", "segment.bytes": "1024"},
    )
    assert format_topic_line(t) == (
        "Topic: t\tTopicId: NPmZHyhbR9y00wMglMH2sg\tPartitionCount: 2\tReplicationFactor: 2"
        "\tConfigs: retention.ms=1000,segment.bytes=1024"
    )
    assert format_partition_line("t", t.partitions[0]) == "\tTopic: t\tPartition: 0\tLeader: 1\tReplicas: 1,2\tIsr: 1"
    assert format_partition_line("t", t.partitions[1]) == "\tTopic: t\tPartition: 1\tLeader: none\tReplicas: 2,1\tIsr: "


def test_describe_layout_without_topic_id_or_configs() -> None:
    t = TopicDescription(name="x", partitions=[PartitionDescription(0, 0, [0], [0])], marked_for_deletion=True)
    assert format_topic_line(t) == (
        "Topic: x\tPartitionCount: 1\tReplicationFactor: 1\tConfigs: \tMarkedForDeletion: true"
    )


def test_replica_assignment() -> None:
    assert parse_replica_assignment("1:2,2:3") == [[1, 2], [2, 3]]


def test_exactly_one_action() -> None:
    res = runner.invoke(app, ["topics", "--bootstrap-server", "127.0.0.1:9", "--list", "--describe"])
    assert res.exit_code == 1
    assert "exactly one action" in res.stderr


def test_create_needs_topic_and_valid_partitions() -> None:
    res = runner.invoke(app, ["topics", "--bootstrap-server", "127.0.0.1:9", "--create"])
    assert res.exit_code == 1
    assert 'Missing required argument "[topic]"' in res.stderr
    args = ["topics", "--bootstrap-server", "127.0.0.1:9", "--create", "--topic", "t", "--partitions", "0"]
    res = runner.invoke(app, args)
    assert res.exit_code == 1
    assert res.stderr.strip() == "Error while executing topic command : The partitions must be greater than 0"


def test_needs_exactly_one_connection_option() -> None:
    res = runner.invoke(app, ["topics", "--list"])
    assert res.exit_code == 1
    assert "--bootstrap-server or --zookeeper" in res.stderr
