"""num.broker.processes: what each process of the set is derived to be, and what is refused at start."""

from pathlib import Path

import pytest

from kbus.common.broker_config import ConfigError, KafkaConfig
from kbus.common.broker_processes import broker_process_specs
from kbus.server.broker_set import log_dirs_layout_error

BASE = {
    "broker.id": "10",
    "listeners": "PLAINTEXT://:9092,SSL://:9192",
    "log.dirs": "/d1,/d2",
    "zookeeper.connect": "zk:2181",
    "num.broker.processes": "3",
}


def specs(**changes: str):
    return broker_process_specs(KafkaConfig.from_properties({**BASE, **changes}), "host-a")


def test_one_process_is_a_plain_broker() -> None:
    assert broker_process_specs(KafkaConfig.from_properties({**BASE, "num.broker.processes": "1"}), "h") == []
    assert KafkaConfig.from_properties({}).num_broker_processes == 1


def test_each_process_gets_its_id_ports_dirs_and_the_host_as_rack() -> None:
    out = specs(**{"advertised.listeners": "PLAINTEXT://pub:9092,SSL://pub:9192", "metrics.port": "9404"})
    assert [s.broker_id for s in out] == [10, 11, 12]
    third = out[2].overrides
    assert third["broker.id"] == "12"
    assert third["listeners"] == "PLAINTEXT://:9094,SSL://:9194"
    assert third["advertised.listeners"] == "PLAINTEXT://pub:9094,SSL://pub:9194"
    assert third["log.dirs"] == "/d1/broker-12,/d2/broker-12"
    assert third["metrics.port"] == "9406"
    assert third["broker.rack"] == "host-a"
    assert third["num.broker.processes"] == "1"
    # each derived config is itself a valid one-process broker config
    derived = KafkaConfig.from_properties({**BASE, **third})
    assert derived.broker_id == 12 and derived.num_broker_processes == 1


def test_an_operators_rack_and_ipv6_hosts_are_kept() -> None:
    out = specs(**{"broker.rack": "eu-1a", "listeners": "PLAINTEXT://[::1]:9092"})
    assert "broker.rack" not in out[1].overrides
    assert out[1].overrides["listeners"] == "PLAINTEXT://[::1]:9093"


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"zookeeper.connect": ""}, "needs zookeeper.connect"),
        ({"broker.id": "-1"}, "needs broker.id set"),
        ({"listeners": "PLAINTEXT://:0"}, "needs fixed listener ports"),
        ({"listeners": "PLAINTEXT://:9092,SSL://:9093"}, "would take port 9093"),
        ({"metrics.port": "9093"}, "would take port 9093"),
        ({"listeners": "PLAINTEXT://:65534"}, "above 65535"),
    ],
)
def test_what_cannot_work_is_refused_with_one_line(changes: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        specs(**changes)


def test_data_of_the_other_mode_is_refused_not_ignored(tmp_path: Path) -> None:
    """Switching num.broker.processes would start brokers on empty logs beside the real data: refused, with how."""
    assert log_dirs_layout_error([tmp_path], 2) is None and log_dirs_layout_error([tmp_path], 1) is None
    (tmp_path / "meta.properties").write_text("broker.id=1\n")
    assert "holds a single broker's data" in (log_dirs_layout_error([tmp_path], 2) or "")
    assert log_dirs_layout_error([tmp_path], 1) is None
    (tmp_path / "meta.properties").unlink()
    (tmp_path / "broker-1").mkdir()
    (tmp_path / "broker-1" / "meta.properties").write_text("broker.id=1\n")
    assert log_dirs_layout_error([tmp_path], 2) is None
    assert "holds the data of num.broker.processes brokers (broker-1)" in (log_dirs_layout_error([tmp_path], 1) or "")
    # a set's own process: its log.dirs is <dir>/broker-<id>, with meta.properties at the top
    assert log_dirs_layout_error([tmp_path / "broker-1"], 1) is None
