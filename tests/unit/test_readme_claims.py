"""The README's failover figure is stated for the session timeout the shipped config actually runs with."""

import re
from pathlib import Path

from kbus.common.broker_config import KafkaConfig

REPO = Path(__file__).resolve().parents[2]


def test_failover_figure_names_the_shipped_session_timeout() -> None:
    shipped = KafkaConfig.load(REPO / "config" / "server.properties")
    readme = " ".join((REPO / "README.md").read_text().split())
    m = re.search(r"kill -9` takes about `zookeeper.session.timeout.ms`: ([\d.]+)-([\d.]+) s with the shipped "
                  r"`config/server.properties` \(Kafka's default, (\d+) ms", readme)
    assert m is not None, "the README's failover sentence changed: keep it tied to the shipped config"
    low, high, stated_ms = float(m.group(1)), float(m.group(2)), int(m.group(3))
    assert stated_ms == shipped.zookeeper_session_timeout_ms
    # a kill -9 cannot fail over before the session expires
    assert stated_ms / 1000 <= low <= high
