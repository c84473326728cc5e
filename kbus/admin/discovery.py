"""Find the brokers of a ZooKeeper-mode cluster from /brokers/ids, for tools that old tutorials run with
`--zookeeper host:port` (Kafka's pre-0.10 console consumer) instead of a bootstrap server."""

from __future__ import annotations

import logging

from kbus.admin.errors import AdminError

_quiet = logging.getLogger("kbus.admin.discovery.kazoo")
_quiet.setLevel(logging.CRITICAL)


def bootstrap_from_zookeeper(connect: str, timeout_s: float = 10.0) -> str:
    """`host:port,...` of every broker registered under `connect` (host:port[,...][/chroot])."""
    # Imported here: kazoo and the znode codec are only needed by this rarely used path.
    from kbus.common.errors import KafkaError
    from kbus.zk.client import KafkaZkClient

    try:
        zk = KafkaZkClient.connect(connect, 30.0, timeout_s, logger=_quiet)
    except KafkaError as exc:
        raise AdminError(f"Could not connect to ZooKeeper at {connect}: {exc}", "_TIMED_OUT") from None
    try:
        brokers = zk.get_all_brokers()
    except Exception as exc:  # kazoo raises many types; the tool only needs one clear line
        raise AdminError(f"Could not read brokers from ZooKeeper at {connect}: {exc}") from None
    finally:
        zk.close()
    if not brokers:
        raise AdminError(f"No broker is registered in ZooKeeper at {connect} (is kbus server-start running?)")
    return ",".join(f"{b.host}:{b.port}" for b in brokers)
