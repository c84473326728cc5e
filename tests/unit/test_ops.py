"""Unit tests for kbus.ops (no processes): log config, HTTP endpoint routing, gauges, health rules, install plans."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from kbus.common.broker_config import KafkaConfig
from kbus.common.properties import parse_properties
from kbus.ops import broker_metrics, daemon, install
from kbus.ops.health import HealthReport, PartitionView, answering_broker, evaluate, evaluate_metadata
from kbus.ops.http_endpoint import OpsEndpoint, Response, parse_request_line
from kbus.ops.logging_config import LoggingConfigError, apply, expand, load
from kbus.server.coordinator.consumer_group import ConsumerGroup, ConsumerGroupMember
from kbus.server.coordinator.share_group import ShareGroup
from kbus.server.metadata.types import PartitionState
from kbus.server.util.metrics import Metrics

REPO = Path(__file__).resolve().parents[2]


# ---- fakes shaped like Broker / Partition / GroupCoordinator -----------------------------------------------------


@dataclass
class FakePartition:
    topic: str
    index: int
    state: PartitionState
    high_watermark: int = 0
    local: int = 0

    @property
    def is_leader(self) -> bool:
        return self.state.leader == self.local

    @property
    def log(self) -> SimpleNamespace:
        return SimpleNamespace(log_end_offset=self.high_watermark + 1)


@dataclass
class FakeBroker:
    broker_id: int = 0
    cluster_id: str = "c1"
    partitions: dict = field(default_factory=dict)
    group_coordinator: object = None
    controller: int = 0
    stopping: bool = False
    offline: int = 0
    offline_dirs: int = 0

    def controller_id(self) -> int:
        return self.controller

    def offline_partitions(self) -> int:
        return self.offline

    def offline_log_dirs(self) -> int:
        return self.offline_dirs

    def get_partition(self, topic: str, index: int):
        return self.partitions.get((topic, index))


def part(topic: str, index: int, leader: int, replicas: list[int], isr: list[int], hw: int = 0) -> FakePartition:
    return FakePartition(topic, index, PartitionState(leader, 0, replicas, isr), hw)


def samples(text: str) -> dict[str, float]:
    return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line[:1] != "#"}


# ---- logging config ----------------------------------------------------------------------------------------------


def test_expand_variables_defaults_and_comments() -> None:
    env = {"KBUS_LOG_DIR": "/var/log/kbus", "EMPTY": ""}
    assert expand("f: ${KBUS_LOG_DIR}/server.log\n", env) == "f: /var/log/kbus/server.log\n"
    assert expand("f: ${NOPE:-logs}/x\n", env) == "f: logs/x\n"
    assert expand("f: ${EMPTY:-d}\n", env) == "f: d\n"
    assert expand("  # mentions ${NOPE} freely\n", env) == "  # mentions ${NOPE} freely\n"
    with pytest.raises(LoggingConfigError, match=r"\$\{NOPE\} is not set"):
        expand("f: ${NOPE}\n", env)


@pytest.fixture
def restore_logging():
    root = logging.getLogger()
    saved = (root.level, list(root.handlers))
    yield
    for h in root.handlers:
        if h not in saved[1]:
            h.close()
    root.handlers[:] = saved[1]
    root.setLevel(saved[0])


def test_shipped_logging_yaml_applies(restore_logging) -> None:
    doc = load(REPO / "config/logging.yaml", {})
    assert doc["root"]["handlers"] == ["stdout"]
    apply(REPO / "config/logging.yaml", {})
    assert logging.getLogger("kazoo.client").level == logging.WARNING


def test_file_handler_writes_kafka_style_lines(tmp_path: Path, restore_logging) -> None:
    cfg = tmp_path / "logging.yaml"
    cfg.write_text(
        (REPO / "config/logging.yaml").read_text()
        + "\n".join([
            "",
            "handlers:",
            "  file:",
            "    class: logging.FileHandler",
            "    filename: ${KBUS_LOG_DIR:-logs}/server.log",
            "    formatter: kafka",
            "root: {level: INFO, handlers: [file]}",
            "",
        ])
    )
    apply(cfg, {"KBUS_LOG_DIR": str(tmp_path / "new-dir")})
    logging.getLogger("kbus.server").info("[KafkaServer id=%d] started", 7)
    for h in logging.getLogger().handlers:
        h.flush()
    line = (tmp_path / "new-dir/server.log").read_text().strip()
    assert line.endswith("INFO [KafkaServer id=7] started (kbus.server)")
    assert line.startswith("[20") and line[24] == "]"  # [2026-11-22 01:05:16,732]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("version: 1\nhandlers: {h: {class: no.such.Handler}}\nroot: {handlers: [h]}\n", "is invalid"),
        ("version: 1\nroot: [unclosed\n", "not valid YAML"),
        ("just: text\n", "version: 1"),
    ],
)
def test_bad_log_configs_are_one_line_errors(tmp_path: Path, text: str, message: str, restore_logging) -> None:
    cfg = tmp_path / "bad.yaml"
    cfg.write_text(text)
    with pytest.raises(LoggingConfigError) as err:
        apply(cfg, {})
    assert message in str(err.value) and "\n" not in str(err.value) and str(cfg) in str(err.value)


def test_missing_log_config(tmp_path: Path) -> None:
    with pytest.raises(LoggingConfigError, match="cannot read log config"):
        load(tmp_path / "nope.yaml")


# ---- HTTP endpoint -----------------------------------------------------------------------------------------------


def test_parse_request_line() -> None:
    assert parse_request_line(b"GET /metrics?x=1 HTTP/1.1\r\nHost: a\r\n\r\n") == ("GET", "/metrics")
    assert parse_request_line(b"head /health HTTP/1.0\r\n\r\n") == ("HEAD", "/health")
    assert parse_request_line(b"\x00\x00\x00\x10garbage\r\n\r\n") is None


def test_routes() -> None:
    m = Metrics()
    m.inc("kbus_messages_in_total", 3, topic="t")
    healthy = {"ok": True}
    ep = OpsEndpoint(m, lambda: (healthy["ok"], {"status": "ok" if healthy["ok"] else "unhealthy"}))
    r = ep.respond("GET", "/metrics")
    assert r.status == 200 and b'kbus_messages_in_total{topic="t"} 3' in r.body
    assert ep.respond("GET", "/health").status == 200
    healthy["ok"] = False
    r = ep.respond("GET", "/health")
    assert r.status == 503 and json.loads(r.body) == {"status": "unhealthy"}
    assert ep.respond("GET", "/other").status == 404
    assert ep.respond("DELETE", "/metrics").status == 405
    head = Response(200, "text/plain", b"abc").encode(head_only=True)
    assert head.startswith(b"HTTP/1.1 200 OK\r\n") and b"Content-Length: 3\r\n" in head and head.endswith(b"\r\n\r\n")


def test_endpoint_serves_over_a_socket() -> None:
    async def go() -> bytes:
        ep = OpsEndpoint(Metrics(), lambda: (True, {}))
        host, port = await ep.start("127.0.0.1", 0)
        reader, writer = await asyncio.open_connection(host, port)
        writer.write(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        data = await reader.read()
        writer.close()
        await ep.stop()
        return data

    data = asyncio.run(go())
    assert data.startswith(b"HTTP/1.1 200 OK") and data.endswith(b"{}\n")


# ---- gauges ------------------------------------------------------------------------------------------------------


def test_broker_gauges() -> None:
    b = FakeBroker()
    b.partitions = {
        ("a", 0): part("a", 0, 0, [0, 1], [0, 1], hw=10),
        ("a", 1): part("a", 1, 0, [0, 1], [0], hw=5),  # under-replicated, led here
        ("a", 2): part("a", 2, 1, [0, 1], [1], hw=7),  # led elsewhere: not ours to count
    }
    group = SimpleNamespace(
        group_id="g", state=SimpleNamespace(value="Stable"),
        offsets={("a", 0): SimpleNamespace(offset=4), ("a", 2): SimpleNamespace(offset=1)},
    )
    b.group_coordinator = SimpleNamespace(groups={"g": group}, consumer_groups={}, share_groups={})
    m = Metrics()
    broker_metrics.register(b, m)
    s = samples(m.render())
    assert s["kbus_partitions"] == 3 and s["kbus_leader_partitions"] == 2
    assert s["kbus_under_replicated_partitions"] == 1
    assert s["kbus_active_controller"] == 1
    assert s["kbus_offline_partitions"] == 0
    b.offline = 2
    assert samples(m.render())["kbus_offline_partitions"] == 2
    assert s["kbus_offline_log_directories"] == 0
    b.offline_dirs = 1
    assert samples(m.render())["kbus_offline_log_directories"] == 1
    assert s["kbus_isr_shrinks_total"] == 0 and s["kbus_isr_expands_total"] == 0
    assert s['kbus_consumer_group_lag{group="g",partition="0",topic="a"}'] == 6
    assert 'kbus_consumer_group_lag{group="g",partition="2",topic="a"}' not in s
    assert s["kbus_consumer_groups"] == 1 and s['kbus_consumer_groups_by_state{state="Stable"}'] == 1
    assert s['kbus_partition_isr_size{partition="1",topic="a"}'] == 1
    assert s['kbus_group_count{protocol="classic"}'] == 1 and s['kbus_group_count{protocol="consumer"}'] == 0
    assert s['kbus_consumer_group_count{state="stable"}'] == 0 and s['kbus_share_group_count{state="empty"}'] == 0
    b.controller = 5
    b.group_coordinator = None
    s = samples(m.render())
    assert s["kbus_active_controller"] == 0 and s["kbus_consumer_groups"] == 0
    assert s['kbus_group_count{protocol="classic"}'] == 0 and s['kbus_consumer_group_count{state="empty"}'] == 0
    assert s["kbus_offline_partitions"] == 0  # only the active controller reports them


def test_group_counts_per_protocol_and_state() -> None:
    """Kafka's group-coordinator-metrics: group-count{protocol}, consumer-group-count{state}, share-group-count."""
    b = FakeBroker()
    holder = SimpleNamespace(group_id="c1", state=SimpleNamespace(value="Empty"), offsets={})
    classic = SimpleNamespace(group_id="k", state=SimpleNamespace(value="Stable"), offsets={})
    assigning = ConsumerGroup("c1", group_epoch=2, assignment_epoch=1,
                              members={"m": ConsumerGroupMember("m", member_epoch=1)})
    stable = ConsumerGroup("c2", group_epoch=1, assignment_epoch=1,
                           members={"m": ConsumerGroupMember("m", member_epoch=1)})
    b.group_coordinator = SimpleNamespace(
        groups={"c1": holder, "k": classic},  # c1's offsets live in an Empty classic group of its id
        consumer_groups={"c1": assigning, "c2": stable, "c3": ConsumerGroup("c3")},
        share_groups={"s": ShareGroup("s", 0)},
    )
    m = Metrics()
    broker_metrics.register(b, m)
    s = samples(m.render())
    assert [s[f'kbus_group_count{{protocol="{p}"}}'] for p in ("classic", "consumer", "share")] == [1, 3, 1]
    by_state = {st: s[f'kbus_consumer_group_count{{state="{st}"}}'] for st in broker_metrics.CONSUMER_GROUP_STATES}
    assert by_state == {"empty": 1, "assigning": 1, "reconciling": 0, "stable": 1, "dead": 0}
    assert s['kbus_share_group_count{state="empty"}'] == 1 and s['kbus_share_group_count{state="stable"}'] == 0


# ---- health rules ------------------------------------------------------------------------------------------------


def test_evaluate_live_broker() -> None:
    b = FakeBroker()
    b.partitions = {("a", 0): part("a", 0, 0, [0], [0])}
    assert evaluate(b).healthy
    b.partitions[("a", 1)] = part("a", 1, 0, [0, 1], [0])
    b.partitions[("b", 0)] = part("b", 0, -1, [0, 1], [])
    r = evaluate(b)
    assert not r.healthy and r.under_replicated == ["a-1"] and r.offline == ["b-0"]
    assert r.summary() == (
        "broker 0 is not healthy: 1 offline partitions (b-0); 1 under-replicated partitions (a-1)"
    )
    b.stopping = True
    assert "shutting down" in evaluate(b).problems


def test_evaluate_metadata_only_counts_the_brokers_partitions() -> None:
    views = [
        PartitionView("t", 0, 1, (1, 2), (1, 2)),
        PartitionView("t", 1, 1, (1, 2), (1,)),  # broker 1 leads it, follower 2 out of sync
        PartitionView("t", 2, 3, (3, 4), (3,)),  # not broker 1's
    ]
    r = evaluate_metadata(1, views)
    assert r.partitions == 2 and r.under_replicated == ["t-1"]
    r2 = evaluate_metadata(2, views)
    assert r2.healthy and r2.partitions == 2  # followers do not own the ISR
    assert evaluate_metadata(-1, views).under_replicated == ["t-1", "t-2"]


def test_answering_broker() -> None:
    brokers = [SimpleNamespace(id=1, host="h1", port=9092), SimpleNamespace(id=2, host="h2", port=9093)]
    assert answering_broker("h2:9093", -1, brokers) == 2
    assert answering_broker("localhost:9093", -1, brokers) == 2
    assert answering_broker("x:1", 7, brokers) == 7
    assert answering_broker("x:1", -1, brokers) == -1
    assert answering_broker("x:1", -1, brokers[:1]) == 1


def test_report_summary_limits_names() -> None:
    r = HealthReport(0, 9, under_replicated=[f"t-{i}" for i in range(8)])
    assert r.summary().endswith("(t-0, t-1, t-2, t-3, t-4, ... 3 more)")


# ---- install plans -----------------------------------------------------------------------------------------------


def test_set_property() -> None:
    assert install.set_property("a=1\nb=2\n", "b", "3") == "a=1\nb=3\n"
    assert install.set_property("#b=2\na=1\n", "b", "3") == "b=3\na=1\n"
    assert install.set_property("#b=2\nb = 5\n", "b", "3") == "#b=2\nb=3\n"
    assert install.set_property("a=1", "c", "3", "why") == "a=1\n\n# why\nc=3\n"
    assert install.set_property("ab=1\n", "a", "2") == "ab=1\na=2\n"


def test_installed_server_properties_are_a_valid_service_config() -> None:
    text = install.server_properties((REPO / "config/server.properties").read_text())
    cfg = KafkaConfig.from_properties(parse_properties(text))
    assert [str(d) for d in cfg.log_dirs] == ["/var/lib/kbus/data"]
    assert cfg.zookeeper_connect == "localhost:2181"
    assert (cfg.metrics_port, cfg.metrics_host) == (install.METRICS_PORT, "127.0.0.1")
    zk = install.zookeeper_properties((REPO / "config/zookeeper.properties").read_text())
    assert parse_properties(zk)["dataDir"] == "/var/lib/kbus/zookeeper"


def test_staged_install_and_uninstall(tmp_path: Path) -> None:
    kbus_bin = Path("/usr/bin/true")
    lines: list[str] = []
    install.execute(install.install_plan(kbus_bin, tmp_path), dry_run=False, echo=lines.append)
    unit = (tmp_path / "etc/systemd/system/kbus.service").read_text()
    assert "ExecStart=/usr/bin/true server-start /etc/kbus/server.properties" in unit
    assert install.SHIPPED_KBUS not in unit
    assert (tmp_path / "etc/kbus/logging.yaml").read_text() == (REPO / "config/logging.yaml").read_text()
    assert oct((tmp_path / "var/lib/kbus/data").stat().st_mode & 0o777) == "0o750"
    assert not any(line.startswith(("useradd", "systemctl")) for line in lines)
    # an operator's edit survives a re-install unless --force
    props = tmp_path / "etc/kbus/server.properties"
    props.write_text(props.read_text() + "num.partitions=8\n")
    install.execute(install.install_plan(kbus_bin, tmp_path), dry_run=False, echo=lines.append)
    assert "num.partitions=8" in props.read_text()
    install.execute(install.install_plan(kbus_bin, tmp_path, force=True), dry_run=False, echo=lines.append)
    assert "num.partitions=8" not in props.read_text()

    install.execute(install.uninstall_plan(tmp_path), dry_run=False, echo=lines.append)
    assert not (tmp_path / "etc/systemd/system/kbus.service").exists()
    assert props.exists() and (tmp_path / "var/lib/kbus/data").is_dir()
    install.execute(install.uninstall_plan(tmp_path, purge=True), dry_run=False, echo=lines.append)
    assert not (tmp_path / "etc/kbus").exists() and not (tmp_path / "var/lib/kbus").exists()


def test_installed_from_a_wheel_the_templates_come_from_share_kbus(monkeypatch: pytest.MonkeyPatch) -> None:
    """`pip install kbus` (no checkout): config/ and systemd/ are installed as data files under <venv>/share/kbus."""
    assert install.default_source() == REPO  # an editable install of this checkout
    monkeypatch.setattr(install, "SOURCE_ROOT", Path("/nonexistent/site-packages"))
    assert install.default_source() == Path(sys.prefix) / "share" / "kbus"
    pyproject = (REPO / "pyproject.toml").read_text()
    for rel in ("config/server.properties", "config/zookeeper.properties", "config/logging.yaml", *(
        f"systemd/{u}" for u in install.UNITS
    )):
        assert f'"{rel}"' in pyproject, f"{rel} is not shipped as a data file"


def test_missing_source_tree_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(install.InstallError, match=r"config/server.properties not found.*--source"):
        install.install_plan(Path("/usr/bin/true"), tmp_path, source=tmp_path)


def test_install_service_dry_run_prints_every_action_and_does_nothing(tmp_path: Path) -> None:
    from kbus.cli.commands import app

    watched = (Path("/etc/kbus"), Path("/var/lib/kbus"), Path("/etc/systemd/system/kbus.service"))
    before = {p: p.exists() for p in watched}
    result = CliRunner().invoke(app, ["install-service", "--dry-run", "--kbus-bin", "/usr/bin/true"])
    assert result.exit_code == 0, result.output
    out = result.output.splitlines()
    if not before[Path("/etc/kbus")]:
        assert "install -d -m 0755 /etc/kbus" in out
        assert any(line.startswith("write /etc/kbus/server.properties (") for line in out)
    assert "install -d -m 0750 -o kbus -g kbus /var/lib/kbus/data" in out
    assert "write /etc/systemd/system/kbus.service (ExecStart=/usr/bin/true ..., mode 0644)" in out
    assert any("systemctl daemon-reload" in line for line in out)
    assert out[0].startswith(("useradd --system", "# user kbus exists"))
    assert {p: p.exists() for p in before} == before

    result = CliRunner().invoke(app, ["uninstall-service", "--dry-run", "--purge"])
    assert result.exit_code == 0
    assert "rm -f /etc/systemd/system/kbus.service" in result.output and "rm -rf /var/lib/kbus" in result.output
    assert {p: p.exists() for p in before} == before


def test_units_sandbox_hides_home_and_tmp_so_a_venv_there_is_refused() -> None:
    units = [(REPO / "systemd" / u).read_text() for u in install.UNITS]
    for hidden in ("/root/venv/bin/kbus", "/home/ann/.venv/bin/kbus", "/run/user/1000/kbus", "/tmp/v/bin/kbus"):
        with pytest.raises(install.InstallError, match=r"hides /(root|home|run/user|tmp) from the service.*/opt/kbus"):
            install.check_reachable(units, [Path(hidden)])
    install.check_reachable(units, [Path("/opt/kbus/venv/bin/kbus"), Path("/usr/bin/python3.11")])
    install.check_reachable(units, [Path("/tmpfoo/bin/kbus"), Path("/homes/kbus")])  # only the directories themselves
    # units an operator relaxed (ProtectHome=read-only) let a venv under /root through; PrivateTmp still applies
    relaxed = [u.replace("ProtectHome=yes", "ProtectHome=read-only") for u in units]
    install.check_reachable(relaxed, [Path("/root/venv/bin/kbus")])
    with pytest.raises(install.InstallError, match="PrivateTmp=yes hides /tmp"):
        install.check_reachable(relaxed, [Path("/tmp/v/bin/kbus")])


def test_service_paths_follow_the_venv_python_to_its_base(tmp_path: Path) -> None:
    """A venv under /opt made by a python3 under /root (pyenv) fails too: its bin/python is a symlink into /root."""
    base = tmp_path / "base" / "bin"
    base.mkdir(parents=True)
    (base / "python3.11").write_text("")
    venv_bin = tmp_path / "venv" / "bin"
    venv_bin.mkdir(parents=True)
    (venv_bin / "python").symlink_to(base / "python3.11")
    script = venv_bin / "kbus"
    script.write_text(f"#!{venv_bin / 'python'}\nimport kbus\n")
    paths = install.service_paths(script, package_dir=tmp_path / "src" / "kbus")
    assert paths == [script, venv_bin / "python", base / "python3.11", tmp_path / "src" / "kbus"]


def test_install_service_refuses_a_kbus_the_sandbox_hides() -> None:
    import tempfile

    from kbus.cli.commands import app

    tmp_path = Path(tempfile.mkdtemp(dir="/tmp"))  # under /tmp whatever TMPDIR says
    script = tmp_path / "kbus"
    script.write_text("#!/usr/bin/python3\n")
    script.chmod(0o755)
    result = CliRunner().invoke(app, ["install-service", "--dry-run", "--kbus-bin", str(script)])
    assert result.exit_code == 1
    (line,) = result.output.strip().splitlines()
    assert line.startswith("ERROR the units' PrivateTmp=yes hides /tmp from the service, so it could not run /tmp/")
    assert "python3 -m venv /opt/kbus/venv" in line
    assert not (tmp_path / "etc").exists()
    # staged (--prefix) it is a warning: the tree may be packaged for a host where the path differs
    staged = ["install-service", "--dry-run", "--prefix", str(tmp_path), "--kbus-bin", str(script)]
    result = CliRunner().invoke(app, staged)
    assert result.exit_code == 0, result.output
    assert result.output.startswith("# WARNING the units' PrivateTmp=yes hides /tmp")
    script.unlink()
    tmp_path.rmdir()


def test_install_service_needs_root_for_a_real_install(monkeypatch: pytest.MonkeyPatch) -> None:
    from kbus.cli.commands import app

    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    result = CliRunner().invoke(app, ["install-service"])
    assert result.exit_code == 1
    assert "install-service needs root" in result.output


# ---- daemon helpers ----------------------------------------------------------------------------------------------


def test_is_kbus_server() -> None:
    assert daemon.is_kbus_server(["/v/bin/python", "-m", "kbus.server", "s.properties"])
    assert daemon.is_kbus_server(["/v/bin/python3", "/v/bin/kbus", "server-start", "s.properties"])
    assert not daemon.is_kbus_server(["/v/bin/python3", "/v/bin/kbus", "topics", "--list"])
    assert not daemon.is_kbus_server(["sleep", "100"])


def test_stale_pid_files(tmp_path: Path) -> None:
    files = daemon.DaemonFiles.for_name("server", tmp_path)
    assert files.pid.name == "kbusServer.pid" and files.out.name == "kbusServer.out"
    assert daemon.live_pid(files.pid) is None
    files.pid.write_text(f"{os.getpid()}\n")  # alive, but pytest is not a broker
    assert daemon.live_pid(files.pid) is None
    assert daemon.stop_from_pid_file(log_dir=tmp_path) is None
    assert not files.pid.exists()


def test_daemon_log_dir_that_cannot_be_created(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(daemon.DaemonError, match=r"^ERROR cannot create log directory .*file/logs: Not a directory$"):
        daemon.start_daemon("server", None, [f"log.dirs={tmp_path / 'data'}"], log_dir=blocker / "logs")
