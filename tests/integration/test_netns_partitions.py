"""Network partitions, not process faults (issue 20): ZooKeeper, three brokers and the clients each in a network
namespace of their own, joined by veth pairs on a bridge in another namespace; a link is cut by dropping every
packet between two namespaces (tc netem loss 100% on the matching destination, both ways), so connections hang as
on a real partition instead of being refused. Nothing runs in the host's network: the clients are subprocesses in
their own namespace (tests/netns_client.py).

- a leader cut off from ZooKeeper but not from clients or the other brokers: its session expires, the controller
  elects another in-sync replica, and no acks=all write acknowledged by anyone is lost;
- a follower cut off from its leader leaves the ISR (replica.lag.time.max.ms) and comes back once healed, with
  acks=all writes going on and none lost;
- the controller cut off from every other broker (not from ZooKeeper): it leaves the ISR it follows, and when the
  leader is then killed it still elects the in-sync replica left (kbus's controller acts through ZooKeeper only),
  none lost.

Needs root (ip netns); skipped cleanly when network namespaces cannot be made."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.kbus_processes import KBUS, REPO, BrokerProcess

pytestmark = [pytest.mark.zookeeper, pytest.mark.integration, pytest.mark.slow]

PREFIX = f"zks{os.getpid() % 100000}"
SUBNET = "10.77.0"
NODES = {"zk": 10, "b1": 11, "b2": 12, "b3": 13, "cl": 20}
SESSION_MS = 6000
LAG_MS = 6000


def sh(*cmd: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(list(cmd), capture_output=True, text=True, timeout=60)
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {done.stderr.strip()}")
    return done


class Network:
    """Namespaces <PREFIX>-<node> with eth0 at 10.77.0.<n>, each veth's other end on a bridge in <PREFIX>-hub."""

    def __init__(self) -> None:
        self.made: list[str] = []

    def ns(self, node: str) -> str:
        return f"{PREFIX}-{node}"

    def ip(self, node: str) -> str:
        return f"{SUBNET}.{NODES[node]}"

    def exec(self, node: str, *cmd: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return sh("ip", "netns", "exec", self.ns(node), *cmd, check=check)

    def build(self) -> None:
        hub = self.ns("hub")
        sh("ip", "netns", "add", hub)
        self.made.append(hub)
        sh("ip", "netns", "exec", hub, "ip", "link", "add", "br0", "type", "bridge")
        sh("ip", "netns", "exec", hub, "ip", "link", "set", "br0", "up")
        for node, n in NODES.items():
            ns = self.ns(node)
            sh("ip", "netns", "add", ns)
            self.made.append(ns)
            end = f"v{node}"
            sh("ip", "netns", "exec", hub, "ip", "link", "add", end, "type", "veth", "peer", "name", "eth0",
               "netns", ns)  # fmt: skip
            sh("ip", "netns", "exec", hub, "ip", "link", "set", end, "master", "br0", "up")
            self.exec(node, "ip", "addr", "add", f"{SUBNET}.{n}/24", "dev", "eth0")
            self.exec(node, "ip", "link", "set", "eth0", "up")
            self.exec(node, "ip", "link", "set", "lo", "up")

    def cut(self, a: str, b: str) -> None:
        """Every packet between a and b dropped, both ways: a blackhole route to the other on each side (tc's
        netem and prio qdiscs are not available in every kernel; a route always is). An established connection
        hangs until TCP gives up; a new one fails at once on the side that tries."""
        self.exec(a, "ip", "route", "replace", "blackhole", f"{self.ip(b)}/32")
        self.exec(b, "ip", "route", "replace", "blackhole", f"{self.ip(a)}/32")

    def heal(self, a: str, b: str) -> None:
        self.exec(a, "ip", "route", "del", "blackhole", f"{self.ip(b)}/32", check=False)
        self.exec(b, "ip", "route", "del", "blackhole", f"{self.ip(a)}/32", check=False)

    def delete(self) -> None:
        # deleting a namespace deletes its end of each veth, and with it the peer end on the bridge
        for ns in reversed(self.made):
            sh("ip", "netns", "del", ns, check=False)
        self.made.clear()


def netns_permitted() -> str | None:
    probe = f"{PREFIX}-probe"
    try:
        done = sh("ip", "netns", "add", probe, check=False)
    except FileNotFoundError:
        return "no `ip` command (iproute2)"
    if done.returncode != 0:
        return done.stderr.strip() or "ip netns add failed"
    sh("ip", "netns", "del", probe, check=False)
    return None


@dataclass
class PartitionedCluster:
    net: Network
    brokers: dict[int, BrokerProcess]
    base: Path

    @property
    def bootstrap(self) -> str:
        return ",".join(f"{self.net.ip(f'b{i}')}:9092" for i in self.brokers)

    def client(self, *args: str, timeout: float = 90) -> str:
        done = subprocess.run(["ip", "netns", "exec", self.net.ns("cl"), sys.executable, "-m", "tests.netns_client",
                               *args], cwd=REPO, capture_output=True, text=True, timeout=timeout)  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"netns_client {args[0]} failed: {done.stderr[-2000:]}")
        return done.stdout

    def producer(self, topic: str, seconds: float, out: Path, bootstrap: str | None = None) -> subprocess.Popen:
        return subprocess.Popen(["ip", "netns", "exec", self.net.ns("cl"), sys.executable, "-m", "tests.netns_client",
                                 "produce", bootstrap or self.bootstrap, topic, str(seconds), str(out)],
                                cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)  # fmt: skip

    def describe(self, topic: str, via: int) -> dict[str, object]:
        state: dict[str, object] = json.loads(self.client("describe", f"{self.net.ip(f'b{via}')}:9092", topic))
        return state

    def wait_state(self, topic: str, via: int, ok: object, timeout: float, what: str) -> float:
        start = time.monotonic()
        last: dict[str, object] = {}
        while time.monotonic() - start < timeout:
            last = self.describe(topic, via)
            if "error" not in last and ok(last):  # type: ignore[operator]
                return time.monotonic() - start
            time.sleep(0.5)
        raise AssertionError(f"timed out after {timeout}s waiting for {what}; last seen via broker {via}: {last}")

    def read_all(self, topic: str, out: Path) -> list[str]:
        self.client("consume", self.bootstrap, topic, str(out), timeout=120)
        return out.read_text().split()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PartitionedCluster]:
    why = netns_permitted()
    if why is not None:
        pytest.skip(f"network namespaces not permitted here: {why}")
    base = tmp_path_factory.mktemp("netns")
    net = Network()
    brokers: dict[int, BrokerProcess] = {}
    zk_pid: int | None = None
    try:
        net.build()
        zk_dir = base / "zk"
        zk_dir.mkdir()
        config = zk_dir / "zookeeper.properties"
        config.write_text(f"dataDir={zk_dir / 'data'}\nclientPort=2181\nclientPortAddress={net.ip('zk')}\n"
                          "maxClientCnxns=0\nadmin.enableServer=false\ntickTime=1000\n"
                          "4lw.commands.whitelist=ruok,srvr,stat\n")  # fmt: skip
        env = {**os.environ, "KBUS_LOG_DIR": str(zk_dir / "logs"), "KBUS_ZK_HEAP_OPTS": "-Xms32m -Xmx192m"}
        done = subprocess.run(["ip", "netns", "exec", net.ns("zk"), KBUS, "zookeeper-start", str(config), "--daemon"],
                              env=env, capture_output=True, text=True, timeout=90, cwd=zk_dir)  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"zookeeper-start: {done.stderr}")
        zk_pid = int((zk_dir / "logs" / "zookeeper.pid").read_text())
        for i in (1, 2, 3):
            node = f"b{i}"
            brokers[i] = BrokerProcess(base / node, {
                "broker.id": str(i), "listeners": f"PLAINTEXT://{net.ip(node)}:9092",
                "zookeeper.connect": f"{net.ip('zk')}:2181/kbus", "zookeeper.session.timeout.ms": str(SESSION_MS),
                "replica.lag.time.max.ms": str(LAG_MS), "default.replication.factor": "3",
                "offsets.topic.replication.factor": "3", "auto.leader.rebalance.enable": "false",
            }, port=9092, netns=net.ns(node))  # fmt: skip
        for b in brokers.values():
            b.start(timeout=60)
        yield PartitionedCluster(net, brokers, base)
    finally:
        for b in brokers.values():
            try:
                b.stop(timeout=20)
            except Exception:
                b.kill()
        if zk_pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(zk_pid, signal.SIGKILL)
        net.delete()


def acked_values(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


def test_a_leader_cut_off_from_zookeeper_is_replaced_and_no_acknowledged_write_is_lost(cluster) -> None:
    c = cluster
    topic = "cut-leader"
    c.client("create", c.bootstrap, topic, "1,2,3")
    c.wait_state(topic, 1, lambda s: s["leader"] == 1 and s["isr"] == [1, 2, 3], 30, "leader 1, isr [1,2,3]")
    acked, acked_via_b1 = c.base / "acked-leader.txt", c.base / "acked-via-b1.txt"
    producer = c.producer(topic, 45, acked)
    try:
        time.sleep(4)
        before = len(acked_values(acked))
        c.net.cut("b1", "zk")  # b1 still reaches the clients and brokers 2 and 3
        failover = c.wait_state(topic, 2, lambda s: s["leader"] in (2, 3) and 1 not in s["isr"],
                                SESSION_MS / 1000 + 20, "a new leader without broker 1 (broker 2's view)")  # fmt: skip
        # broker 1 itself, asked directly (no client redirect): once its session is gone and the others lead, an
        # acks=all write to it must not be acknowledged (its followers no longer fetch from it)
        refused = int(c.client("produce-to", f"{c.net.ip('b1')}:9092", topic, "sent-to-cut-leader").strip())
        # a producer that knows only broker 1: nothing it has acknowledged may be missing afterwards
        stale = c.producer(topic, 6, acked_via_b1, bootstrap=f"{c.net.ip('b1')}:9092")
        stale.wait(120)
        during = len(acked_values(acked))
        time.sleep(2)
    finally:
        c.net.heal("b1", "zk")
    producer.wait(120)
    assert producer.returncode == 0, producer.stderr.read() if producer.stderr else ""
    c.wait_state(topic, 2, lambda s: s["isr"] == [1, 2, 3], 60, "broker 1 back in the ISR")
    log = c.read_all(topic, c.base / "log-leader.txt")
    present = set(log)
    lost = [v for v in acked_values(acked) + acked_values(acked_via_b1) if v not in present]
    assert not lost, f"{len(lost)} acknowledged value(s) lost, first {lost[:5]}"
    assert len(log) == len(present), "a value appears twice in the log"
    assert during > before, "no write acknowledged after the leader was cut off"
    assert refused != 0, "the cut-off leader acknowledged an acks=all write"
    print(f"failover after the cut: {failover:.1f} s (session {SESSION_MS / 1000:g} s); direct acks=all write to "
          f"the cut-off leader: error {refused}; "
          f"{len(acked_values(acked))} + {len(acked_values(acked_via_b1))} acknowledged, 0 lost")  # fmt: skip


def test_a_follower_cut_off_from_its_leader_leaves_the_isr_and_nothing_acknowledged_is_lost(cluster) -> None:
    c = cluster
    topic = "cut-follower"
    c.client("create", c.bootstrap, topic, "1,2,3")
    c.wait_state(topic, 1, lambda s: s["leader"] == 1 and s["isr"] == [1, 2, 3], 30, "leader 1, isr [1,2,3]")
    acked = c.base / "acked-follower.txt"
    producer = c.producer(topic, 30, acked)
    try:
        time.sleep(3)
        c.net.cut("b3", "b1")  # broker 3 still reaches ZooKeeper and broker 2
        shrunk = c.wait_state(topic, 2, lambda s: s["leader"] == 1 and s["isr"] == [1, 2],
                              LAG_MS / 1000 + 15, "broker 3 out of the ISR")  # fmt: skip
        mid = len(acked_values(acked))
        time.sleep(3)
        assert len(acked_values(acked)) > mid, "acks=all writes stopped with 2 of 3 replicas in sync"
    finally:
        c.net.heal("b3", "b1")
    back = c.wait_state(topic, 2, lambda s: s["isr"] == [1, 2, 3], 60, "broker 3 back in the ISR")
    producer.wait(120)
    assert producer.returncode == 0, producer.stderr.read() if producer.stderr else ""
    log = c.read_all(topic, c.base / "log-follower.txt")
    present = set(log)
    lost = [v for v in acked_values(acked) if v not in present]
    assert not lost, f"{len(lost)} acknowledged value(s) lost, first {lost[:5]}"
    print(f"ISR shrank {shrunk:.1f} s after the cut (replica.lag.time.max.ms {LAG_MS}); back {back:.1f} s after "
          f"healing; {len(acked_values(acked))} acknowledged, 0 lost")  # fmt: skip


def test_a_controller_cut_off_from_the_brokers_still_fails_over_and_nothing_acknowledged_is_lost(cluster) -> None:
    c = cluster
    controller = int(c.describe("cut-leader", 1)["controller"])  # type: ignore[call-overload]
    leader, other = [i for i in (1, 2, 3) if i != controller]
    topic = "cut-controller"
    c.client("create", c.bootstrap, topic, f"{leader},{other},{controller}")
    c.wait_state(topic, other, lambda s: s["leader"] == leader and s["isr"] == [1, 2, 3], 30, f"leader {leader}")
    acked = c.base / "acked-controller.txt"
    producer = c.producer(topic, 35, acked)
    cut = [f"b{leader}", f"b{other}"]
    try:
        time.sleep(3)
        for peer in cut:
            c.net.cut(f"b{controller}", peer)  # it still reaches ZooKeeper and the clients
        shrunk = c.wait_state(topic, other, lambda s: s["isr"] == sorted([leader, other]), LAG_MS / 1000 + 15,
                              f"controller {controller} out of the ISR")  # fmt: skip
        c.brokers[leader].kill()  # kill -9: its session expires; the cut-off controller must still elect `other`
        killed = time.monotonic()
        c.wait_state(topic, other, lambda s: s["leader"] == other, SESSION_MS / 1000 + 15,
                     f"broker {other} leading after broker {leader} died")  # fmt: skip
        failover = time.monotonic() - killed
    finally:
        for peer in cut:
            c.net.heal(f"b{controller}", peer)
    producer.wait(120)
    assert producer.returncode == 0, producer.stderr.read() if producer.stderr else ""
    c.brokers[leader].start(timeout=60)
    log = c.read_all(topic, c.base / "log-controller.txt")
    present = set(log)
    lost = [v for v in acked_values(acked) if v not in present]
    assert not lost, f"{len(lost)} acknowledged value(s) lost, first {lost[:5]}"
    print(f"controller {controller} cut off: out of the ISR {shrunk:.1f} s after the cut; leader {leader} killed, "
          f"broker {other} led {failover:.1f} s later; {len(acked_values(acked))} acknowledged, 0 lost")  # fmt: skip
