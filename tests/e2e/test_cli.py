"""The `kbus` console script as users run it (subprocesses) against a real kbus broker process."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.kbus_processes import Cluster, free_port, wait_for_port

pytestmark = pytest.mark.integration

KBUS = str(Path(sys.executable).parent / "kbus")


def kbus(*args: str, stdin: str | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [KBUS, *args], input=stdin, capture_output=True, text=True, timeout=timeout, check=False
    )


def topic_name(prefix: str = "cli") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create(bootstrap: str, topic: str, partitions: int = 1) -> None:
    res = kbus("topics", "--bootstrap-server", bootstrap, "--create", "--topic", topic, "--partitions", str(partitions))
    assert res.returncode == 0, res.stderr
    assert res.stdout == f"Created topic {topic}.\n"


def assert_one_line_error(res: subprocess.CompletedProcess[str]) -> None:
    assert res.returncode != 0
    assert "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr


def test_topics_lifecycle(broker) -> None:
    b = broker.bootstrap
    t = topic_name()
    create(b, t, 3)

    again = kbus("topics", "--bootstrap-server", b, "--create", "--topic", t)
    assert_one_line_error(again)
    assert again.stderr.strip() == f"Error while executing topic command : Topic '{t}' already exists."
    quiet = kbus("topics", "--bootstrap-server", b, "--create", "--topic", t, "--if-not-exists")
    assert quiet.returncode == 0 and quiet.stdout == ""

    listed = kbus("topics", "--bootstrap-server", b, "--list")
    assert t in listed.stdout.splitlines()

    desc = kbus("topics", "--bootstrap-server", b, "--describe", "--topic", t)
    assert desc.returncode == 0, desc.stderr
    lines = desc.stdout.splitlines()
    assert re.fullmatch(
        rf"Topic: {t}\tTopicId: \S+\tPartitionCount: 3\tReplicationFactor: 1\tConfigs: .*", lines[0]
    ), lines[0]
    assert lines[1:] == [f"\tTopic: {t}\tPartition: {p}\tLeader: 0\tReplicas: 0\tIsr: 0" for p in range(3)]

    grow = kbus("topics", "--bootstrap-server", b, "--alter", "--topic", t, "--partitions", "5")
    assert grow.returncode == 0, grow.stderr
    desc = kbus("topics", "--bootstrap-server", b, "--describe", "--topic", t)
    assert "\tPartitionCount: 5\t" in desc.stdout
    shrink = kbus("topics", "--bootstrap-server", b, "--alter", "--topic", t, "--partitions", "2")
    assert_one_line_error(shrink)
    assert "Topic currently has 5 partitions, which is higher than the requested 2." in shrink.stderr

    deleted = kbus("topics", "--bootstrap-server", b, "--delete", "--topic", t)
    assert deleted.returncode == 0, deleted.stderr
    assert t not in kbus("topics", "--bootstrap-server", b, "--list").stdout.splitlines()
    missing = kbus("topics", "--bootstrap-server", b, "--describe", "--topic", t)
    assert_one_line_error(missing)
    assert missing.stderr.strip() == f"Error while executing topic command : Topic '{t}' does not exist as expected"
    assert kbus("topics", "--bootstrap-server", b, "--delete", "--topic", t, "--if-exists").returncode == 0


def test_create_with_configs_shows_them_in_describe(broker) -> None:
    t = topic_name()
    res = kbus(
        "topics", "--bootstrap-server", broker.bootstrap, "--create", "--topic", t,
        "--config", "retention.ms=60000", "--config", "cleanup.policy=delete",
    )
    assert res.returncode == 0, res.stderr
    first = kbus("topics", "--bootstrap-server", broker.bootstrap, "--describe", "--topic", t).stdout.splitlines()[0]
    configs = dict(kv.split("=", 1) for kv in first.split("\tConfigs: ")[1].split(","))
    assert configs["retention.ms"] == "60000"


def test_seed_walkthrough_producer_to_consumer(broker) -> None:
    """The seed article's steps: create topic-1 with 3 partitions, type two lines, read them from the start."""
    t = topic_name("topic-1")
    create(broker.bootstrap, t, 3)
    prod = kbus("console-producer", "--broker-list", broker.bootstrap, "--topic", t, stdin="Hello World\nHello Kafka\n")
    assert prod.returncode == 0, prod.stderr
    assert prod.stdout == ""  # no '>' prompt when stdin is not a terminal
    cons = kbus(
        "console-consumer", "--bootstrap-server", broker.bootstrap, "--topic", t, "--from-beginning",
        "--max-messages", "2", "--timeout-ms", "20000",
    )
    assert cons.returncode == 0, cons.stderr
    assert sorted(cons.stdout.splitlines()) == ["Hello Kafka", "Hello World"]
    assert cons.stderr.strip().splitlines()[-1] == "Processed a total of 2 messages"


def test_keys_and_print_properties(broker) -> None:
    t = topic_name()
    create(broker.bootstrap, t, 1)
    prod = kbus(
        "console-producer", "--bootstrap-server", broker.bootstrap, "--topic", t,
        "--property", "parse.key=true", "--property", "key.separator=:", "--sync",
        stdin="k1:v1\nk2:v2:with:colons\n",
    )
    assert prod.returncode == 0, prod.stderr
    cons = kbus(
        "console-consumer", "--bootstrap-server", broker.bootstrap, "--topic", t, "--from-beginning",
        "--max-messages", "2", "--timeout-ms", "20000",
        "--property", "print.key=true", "--property", "print.offset=true", "--property", "print.partition=true",
        "--property", "print.timestamp=true",
    )
    assert cons.returncode == 0, cons.stderr
    lines = cons.stdout.splitlines()
    assert re.fullmatch(r"CreateTime:\d{13}\tPartition:0\tOffset:0\tk1\tv1", lines[0]), lines
    assert re.fullmatch(r"CreateTime:\d{13}\tPartition:0\tOffset:1\tk2\tv2:with:colons", lines[1]), lines
    # A missing key separator is one error line and a non-zero exit, like Kafka's KafkaException.
    bad = kbus(
        "console-producer", "--bootstrap-server", broker.bootstrap, "--topic", t,
        "--property", "parse.key=true", "--property", "key.separator=:", stdin="no-separator\n",
    )
    assert_one_line_error(bad)
    assert "No key separator found on line number 1: 'no-separator'" in bad.stderr


def test_headers_null_marker_and_partition_offset(broker) -> None:
    t = topic_name()
    create(broker.bootstrap, t, 1)
    prod = kbus(
        "console-producer", "--bootstrap-server", broker.bootstrap, "--topic", t,
        "--property", "parse.key=true", "--property", "parse.headers=true", "--property", "null.marker=NULL",
        stdin="h1:a,h2:NULL\tkey\tNULL\nNULL\tNULL\tplain\n",
    )
    assert prod.returncode == 0, prod.stderr
    cons = kbus(
        "console-consumer", "--bootstrap-server", broker.bootstrap, "--topic", t, "--partition", "0",
        "--offset", "0", "--max-messages", "2", "--timeout-ms", "20000",
        "--property", "print.headers=true", "--property", "print.key=true", "--property", "null.literal=<null>",
    )
    assert cons.returncode == 0, cons.stderr
    assert cons.stdout.splitlines() == ["h1:a,h2:<null>\tkey\t<null>", "NO_HEADERS\t<null>\tplain"]
    second = kbus(
        "console-consumer", "--bootstrap-server", broker.bootstrap, "--topic", t, "--partition", "0",
        "--offset", "1", "--max-messages", "1", "--timeout-ms", "20000",
    )
    assert second.stdout == "plain\n"


def test_group_resumes_from_committed_offset(broker) -> None:
    t = topic_name()
    create(broker.bootstrap, t, 1)
    kbus("console-producer", "--bootstrap-server", broker.bootstrap, "--topic", t, stdin="one\ntwo\nthree\n")
    group = f"g-{uuid.uuid4().hex[:6]}"
    args = ["console-consumer", "--bootstrap-server", broker.bootstrap, "--topic", t, "--group", group,
            "--from-beginning", "--timeout-ms", "20000"]
    first = kbus(*args, "--max-messages", "1")
    assert first.returncode == 0, first.stderr
    assert first.stdout == "one\n"
    # Only what was printed is committed, so the next member of the group continues at "two".
    rest = kbus(*args, "--max-messages", "2")
    assert rest.stdout == "two\nthree\n", rest.stderr


def test_get_offsets_and_delete_records(broker, tmp_path: Path) -> None:
    t = topic_name()
    create(broker.bootstrap, t, 2)
    kbus("console-producer", "--bootstrap-server", broker.bootstrap, "--topic", t,
         "--property", "parse.key=true", "--property", "key.separator=:", stdin="a:1\na:2\na:3\n")
    latest = kbus("get-offsets", "--bootstrap-server", broker.bootstrap, "--topic", t)
    assert latest.returncode == 0, latest.stderr
    ends = dict(line.rsplit(":", 1) for line in latest.stdout.splitlines())
    assert sorted(ends.values()) == ["0", "3"]  # one key: all three records in one partition
    hot = next(tp for tp, end in ends.items() if end == "3").rsplit(":", 1)[1]
    earliest = kbus("get-offsets", "--bootstrap-server", broker.bootstrap, "--topic", t, "--time", "-2")
    assert earliest.stdout.splitlines() == [f"{t}:0:0", f"{t}:1:0"]

    spec = tmp_path / "delete.json"
    spec.write_text(json.dumps({"partitions": [{"topic": t, "partition": int(hot), "offset": 2}], "version": 1}))
    res = kbus("delete-records", "--bootstrap-server", broker.bootstrap, "--offset-json-file", str(spec))
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == [
        "Executing records delete operation",
        "Records delete operation completed:",
        f"partition: {t}-{hot}\tlow_watermark: 2",
    ]
    after = kbus(
        "get-offsets", "--bootstrap-server", broker.bootstrap, "--topic-partitions", f"{t}:{hot}", "--time", "earliest"
    )
    assert after.stdout == f"{t}:{hot}:2\n"


def test_dump_log_prints_the_segment(broker) -> None:
    t = topic_name()
    create(broker.bootstrap, t, 1)
    kbus("console-producer", "--bootstrap-server", broker.bootstrap, "--topic", t, stdin="Hello World\nHello Kafka\n")
    segment = Path(broker.log_dirs) / f"{t}-0" / "00000000000000000000.log"
    res = kbus("dump-log", "--files", str(segment), "--print-data-log")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[:2] == [f"Dumping {segment}", "Log starting offset: 0"]
    assert lines[2].startswith("baseOffset: 0 lastOffset: 1 count: 2 ")
    assert re.search(r" size: \d+ magic: 2 compresscodec: none crc: \d+ isvalid: true$", lines[2]), lines[2]
    assert lines[3].startswith("| offset: 0 CreateTime: ") and lines[3].endswith(" payload: Hello World")
    assert lines[4].endswith(" payload: Hello Kafka")


def test_errors_are_one_line(broker) -> None:
    dead = f"127.0.0.1:{free_port()}"
    for args in (
        ["topics", "--bootstrap-server", dead, "--list"],
        ["console-consumer", "--bootstrap-server", dead, "--topic", "x"],
        ["get-offsets", "--bootstrap-server", dead, "--topic", "x"],
    ):
        started = time.monotonic()
        res = kbus(*args, timeout=30)
        assert_one_line_error(res)
        assert "Could not connect to any broker" in res.stderr
        assert time.monotonic() - started < 15
    res = kbus("console-producer", "--bootstrap-server", dead, "--topic", "x", stdin="a\n", timeout=30)
    assert_one_line_error(res)

    bad_offset = kbus("console-consumer", "--bootstrap-server", broker.bootstrap, "--topic", "x", "--partition", "0",
                      "--offset", "nope")
    assert_one_line_error(bad_offset)
    assert "Valid values are 'earliest', 'latest', or a non-negative long." in bad_offset.stderr
    bad_int = kbus("topics", "--bootstrap-server", broker.bootstrap, "--create", "--topic", "x", "--partitions", "many")
    assert bad_int.returncode == 2 and "Traceback" not in bad_int.stderr
    unknown = kbus("console-consumer", "--bogus")
    assert unknown.returncode == 2 and "No such option" in unknown.stderr and "Traceback" not in unknown.stderr
    bad_name = kbus("topics", "--bootstrap-server", broker.bootstrap, "--create", "--topic", "bad/name")
    assert_one_line_error(bad_name)


def test_server_start_and_stop(tmp_path: Path) -> None:
    port = free_port()
    config = tmp_path / "server.properties"
    config.write_text(
        f"broker.id=0\nlisteners=PLAINTEXT://127.0.0.1:{port}\nlog.dirs={tmp_path / 'data'}\n"
        "offsets.topic.replication.factor=1\nlog.segmant.bytes=1024\n"
    )
    log = (tmp_path / "server.log").open("wb")
    proc = subprocess.Popen([KBUS, "server-start", str(config)], stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        wait_for_port(port, 30, proc)
        assert kbus("topics", "--bootstrap-server", f"127.0.0.1:{port}", "--list").returncode == 0
        # Only the broker started with this config is stopped (other brokers may share the machine).
        other = kbus("server-stop", str(tmp_path / "other.properties"))
        assert other.returncode == 1 and other.stderr.strip() == "No kbus server to stop"
        stop = kbus("server-stop", str(config))
        assert stop.returncode == 0, stop.stderr
        assert proc.wait(30) == 0
        text = (tmp_path / "server.log").read_text()
        assert "shut down completed" in text
        # Kafka's warning for a key it does not know (a typo here), and the broker runs anyway
        assert "The configuration 'log.segmant.bytes' was supplied but isn't a known config." in text
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        log.close()


def test_server_start_without_a_config_prints_usage() -> None:
    done = kbus("server-start")
    assert done.returncode == 1
    assert done.stdout.startswith("USAGE: kbus server-start [-daemon] server.properties")
    daemon = kbus("server-start", "--daemon")
    assert daemon.returncode == 1 and daemon.stdout.startswith("USAGE:")


@pytest.mark.parametrize(
    ("line", "named"),
    [
        # a TLS listener without a keystore, a Java keystore, a SASL listener left at Kafka's GSSAPI default
        ("listeners=SSL://127.0.0.1:{port}\nsecurity.inter.broker.protocol=SSL", "ssl.keystore.location"),
        ("listeners=SASL_SSL://127.0.0.1:{port}\nsecurity.inter.broker.protocol=SASL_SSL", "ssl.keystore.location"),
        ("listeners=SSL://127.0.0.1:{port}\nsecurity.inter.broker.protocol=SSL\nssl.keystore.location=/k.jks",
         "ssl.keystore.type"),
        ("listeners=SASL_PLAINTEXT://127.0.0.1:{port}\nsecurity.inter.broker.protocol=SASL_PLAINTEXT",
         "sasl.enabled.mechanisms"),
    ],
)
def test_server_start_refuses_security_it_cannot_provide(tmp_path: Path, line: str, named: str) -> None:
    port = free_port()
    config = tmp_path / "server.properties"
    config.write_text(f"log.dirs={tmp_path / 'data'}\n" + line.format(port=port) + "\n")
    done = kbus("server-start", str(config))
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"ERROR {named}: "), done.stderr
    assert not (tmp_path / "data").exists()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()


def test_shipped_config_files(broker) -> None:
    repo = Path(__file__).resolve().parents[2]
    t = topic_name()
    create(broker.bootstrap, t, 1)
    sent = kbus("console-producer", "--bootstrap-server", broker.bootstrap, "--topic", t,
                "--producer.config", str(repo / "config" / "producer.properties"), stdin="from-config\n")
    assert sent.returncode == 0, sent.stderr
    # consumer.properties names a group (test-consumer-group), so this consumer subscribes and commits.
    got = kbus("console-consumer", "--bootstrap-server", broker.bootstrap, "--topic", t, "--from-beginning",
               "--consumer.config", str(repo / "config" / "consumer.properties"), "--max-messages", "1",
               "--timeout-ms", "20000")
    assert got.returncode == 0, got.stderr
    assert got.stdout == "from-config\n"


def test_prompt_only_on_a_terminal(broker) -> None:
    import os

    t = topic_name()
    create(broker.bootstrap, t, 1)
    master, slave = os.openpty()
    proc = subprocess.Popen([KBUS, "console-producer", "--bootstrap-server", broker.bootstrap, "--topic", t],
                            stdin=slave, stdout=slave, stderr=subprocess.PIPE)
    os.close(slave)
    try:
        os.write(master, b"typed line\n")
        os.write(master, b"\x04")  # Ctrl-D: end of input
        assert proc.wait(30) == 0, proc.stderr.read() if proc.stderr else ""
        seen = b""
        while True:
            try:
                chunk = os.read(master, 1024)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
        assert seen.count(b">") >= 1
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
    got = kbus("console-consumer", "--bootstrap-server", broker.bootstrap, "--topic", t, "--from-beginning",
               "--max-messages", "1", "--timeout-ms", "20000")
    assert got.stdout == "typed line\n"


def test_ctrl_c_ends_the_consumer_with_a_count(broker) -> None:
    import signal

    t = topic_name()
    create(broker.bootstrap, t, 1)
    kbus("console-producer", "--bootstrap-server", broker.bootstrap, "--topic", t, stdin="x\ny\n")
    proc = subprocess.Popen([KBUS, "console-consumer", "--bootstrap-server", broker.bootstrap, "--topic", t,
                             "--from-beginning"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline() == "x\n"
    assert proc.stdout.readline() == "y\n"
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1] == "Processed a total of 2 messages", (err, _out)


def test_delivery_errors_are_reported(broker) -> None:
    t = topic_name()
    res = kbus("topics", "--bootstrap-server", broker.bootstrap, "--create", "--topic", t,
               "--config", "max.message.bytes=200")
    assert res.returncode == 0, res.stderr
    sent = kbus("console-producer", "--bootstrap-server", broker.bootstrap, "--topic", t, "--sync",
                stdin="small\n" + "x" * 1000 + "\nafter\n")
    assert sent.returncode == 1
    assert "Traceback" not in sent.stderr
    errors = [line for line in sent.stderr.splitlines() if line.startswith("ERROR")]
    assert len(errors) == 1
    assert errors[0].startswith(f"ERROR Error when sending message to topic {t} with key: null, value: 1000 bytes")
    got = kbus("console-consumer", "--bootstrap-server", broker.bootstrap, "--topic", t, "--from-beginning",
               "--max-messages", "2", "--timeout-ms", "20000")
    assert got.stdout == "small\nafter\n"


def test_missing_topic_without_auto_create(broker_factory) -> None:
    b = broker_factory({"auto.create.topics.enable": "false"})
    sent = kbus("console-producer", "--bootstrap-server", b.bootstrap, "--topic", "nowhere", stdin="x\n")
    assert_one_line_error(sent)
    assert "Topic nowhere not present in metadata" in sent.stderr
    got = kbus("console-consumer", "--bootstrap-server", b.bootstrap, "--topic", "nowhere", "--timeout-ms", "1000")
    assert_one_line_error(got)
    assert "Topic nowhere does not exist" in got.stderr
    offsets = kbus("get-offsets", "--bootstrap-server", b.bootstrap, "--topic", "nowhere")
    assert_one_line_error(offsets)


def test_configs_describe_and_alter(broker) -> None:
    t = topic_name()
    create(broker.bootstrap, t, 1)
    b = broker.bootstrap
    empty = kbus("configs", "--bootstrap-server", b, "--entity-type", "topics", "--entity-name", t, "--describe")
    assert empty.returncode == 0, empty.stderr
    assert empty.stdout == f"Dynamic configs for topic {t} are:\n"
    done = kbus("configs", "--bootstrap-server", b, "--topic", t, "--alter",
                "--add-config", "retention.ms=86400000,cleanup.policy=[compact,delete]")
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"Completed updating config for topic {t}.\n"
    lines = kbus("configs", "--bootstrap-server", b, "--topic", t, "--describe").stdout.splitlines()
    assert lines[0] == f"Dynamic configs for topic {t} are:"
    assert any(line.startswith("  cleanup.policy=compact,delete sensitive=false synonyms={") for line in lines)
    assert any(line.startswith("  retention.ms=86400000 sensitive=false ") for line in lines)
    # kafka-topics --describe shows the overrides too.
    first = kbus("topics", "--bootstrap-server", b, "--describe", "--topic", t).stdout.splitlines()[0]
    assert "retention.ms=86400000" in first
    removed = kbus("configs", "--bootstrap-server", b, "--topic", t, "--alter", "--delete-config", "retention.ms")
    assert removed.returncode == 0, removed.stderr
    assert "retention.ms" not in kbus("configs", "--bootstrap-server", b, "--topic", t, "--describe").stdout
    bad = kbus("configs", "--bootstrap-server", b, "--topic", t, "--alter", "--add-config", "no.such.config=1")
    assert_one_line_error(bad)
    missing = kbus("configs", "--bootstrap-server", b, "--topic", "no-such-topic", "--alter", "--add-config", "a=b")
    assert_one_line_error(missing)


@pytest.mark.parametrize(
    "command",
    [
        ["topics", "--list"],
        ["topics", "--describe"],
        ["configs", "--describe", "--all", "--entity-type", "topics"],
    ],
)
def test_a_closed_pipe_ends_the_output_quietly(broker, command: list[str]) -> None:
    """`kbus ... | head`: Kafka's scripts print through System.out, which swallows a closed pipe; so do ours,
    rather than report '[Errno 32] Broken pipe' as a failed command. The read end is closed before the tool
    starts, so its first write meets the closed pipe whatever the timing."""
    create(broker.bootstrap, topic_name("pipe"))
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        res = subprocess.run(
            [KBUS, *command, "--bootstrap-server", broker.bootstrap],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        os.close(write_end)
    assert (res.returncode, res.stderr) == (0, "")


def test_the_console_consumer_with_stdout_closed_says_so(broker) -> None:
    """Started with fd 1 closed (`1>&-`): kafka-console-consumer.sh's line and a clean exit, not a traceback."""
    topic = topic_name("closed")
    create(broker.bootstrap, topic)
    res = subprocess.run(
        [KBUS, "console-consumer", "--bootstrap-server", broker.bootstrap, "--topic", topic, "--timeout-ms", "2000"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        timeout=60,
        check=False,
        preexec_fn=lambda: os.close(1),  # the child starts with fd 1 closed
    )
    assert res.returncode == 0, res.stderr
    assert res.stderr.splitlines()[0] == "Unable to write to standard out, closing consumer."


def test_create_with_replica_assignment_alone(tmp_path: Path, zk_connect: str) -> None:
    """kafka-topics.sh --bootstrap-server ... --create --replica-assignment 2:1,1:2 (no --partitions): the partition
    count is the assignment's length, each partition's replicas in the given order (the first the preferred leader).
    librdkafka refuses a replica assignment beside the default partition count (-1) kbus used to pass."""
    c = Cluster(tmp_path, zk_connect, size=2)
    try:
        c.start_all()
        t = topic_name("assigned")
        res = kbus("topics", "--bootstrap-server", c.bootstrap, "--create", "--topic", t, "--replica-assignment",
                   "2:1,1:2")
        assert res.returncode == 0, res.stderr
        assert res.stdout == f"Created topic {t}.\n"
        desc = kbus("topics", "--bootstrap-server", c.bootstrap, "--describe", "--topic", t)
        assert desc.returncode == 0, desc.stderr
        rows = desc.stdout.splitlines()[1:]
        found = [re.search(r"Partition: (\d+)\tLeader: (\d+)\tReplicas: ([\d,]+)", r) for r in rows]
        assert [m.groups() if m else r for m, r in zip(found, rows, strict=True)] == [
            ("0", "2", "2,1"), ("1", "1", "1,2")
        ]
        both = kbus("topics", "--bootstrap-server", c.bootstrap, "--create", "--topic", topic_name(), "--partitions",
                    "2", "--replica-assignment", "2:1,1:2")
        assert_one_line_error(both)
    finally:
        c.stop()
