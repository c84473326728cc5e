"""A three-member ZooKeeper ensemble started with `kbus zookeeper-start --daemon`; a broker's metadata store
rides out the loss of the ZooKeeper leader."""

from __future__ import annotations

import time

import pytest

from kbus.server.metadata.zk_store import ZkMetadataStore
from kbus.zk.launcher import four_letter
from tests.kbus_processes import wait_for
from tests.zk_server import ZooKeeperServer, free_port, write_config

pytestmark = [pytest.mark.zookeeper, pytest.mark.integration]


def mode(member: ZooKeeperServer) -> str:
    try:
        reply = four_letter("srvr", "127.0.0.1", member.port, timeout=1)
    except OSError:
        return "down"
    return next((ln.split(": ", 1)[1] for ln in reply.splitlines() if ln.startswith("Mode: ")), "not serving")


def test_myid_is_required_for_an_ensemble_member(tmp_path):
    member = ZooKeeperServer(tmp_path, free_port())
    cfg = write_config(tmp_path, member.port)
    cfg.write_text(cfg.read_text() + "server.1=127.0.0.1:1:2\nserver.2=127.0.0.1:3:4\n")
    done = member.kbus("zookeeper-start", str(cfg), "--daemon")
    assert done.returncode == 1
    assert "myid" in done.stderr and "one of 1, 2" in done.stderr and "Traceback" not in done.stderr


def test_three_member_ensemble_survives_leader_loss(tmp_path_factory):
    peers = [(free_port(), free_port()) for _ in range(3)]
    servers = "".join(f"server.{i + 1}=127.0.0.1:{pp}:{ep}\n" for i, (pp, ep) in enumerate(peers))
    members = []
    for i in range(3):
        base = tmp_path_factory.mktemp(f"ensemble{i + 1}")
        member = ZooKeeperServer(base, free_port())
        cfg = write_config(base, member.port)
        cfg.write_text(cfg.read_text() + "initLimit=10\nsyncLimit=5\n" + servers)
        (base / "data").mkdir()
        (base / "data" / "myid").write_text(f"{i + 1}\n")
        members.append(member)
    store = None
    try:
        t0 = time.monotonic()
        for member in members:
            done = member.kbus("zookeeper-start", str(member.config), "--daemon")
            assert done.returncode == 0, done.stderr
            assert "ensemble member" in done.stdout
        formed = wait_for(lambda: sorted(mode(m) for m in members) == ["follower", "follower", "leader"],
                          timeout=60, what="ensemble formed")  # fmt: skip
        print(f"ensemble formed {time.monotonic() - t0:.2f}s after the first start ({formed:.2f}s after the last)")

        connect = ",".join(m.connect for m in members) + "/kbus"
        store = ZkMetadataStore(connect, 1, "127.0.0.1", 9092, session_timeout_ms=10000)
        store.start()
        store.create_topic("before", 2, 1, {})

        leader = next(m for m in members if mode(m) == "leader")
        assert leader.kbus("zookeeper-stop").returncode == 0
        rest = [m for m in members if m is not leader]
        wait_for(lambda: sorted(mode(m) for m in rest) == ["follower", "leader"], timeout=60, what="re-election")
        # same session, same registration: the broker carries on
        after = store.create_topic("after", 1, 1, {})
        assert after.partitions[0].leader == 1
        assert sorted(store.topics()) == ["after", "before"] and store.is_controller()
    finally:
        if store is not None:
            store.stop()
        for member in members:
            if mode(member) != "down":
                member.kbus("zookeeper-stop")
            member.kill()
