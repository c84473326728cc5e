"""Python stream processing and tools against kbus, each installed from PyPI into its own venv by
scripts/python-apps.sh (their pins clash with kbus's) and run as a subprocess the way a user runs them:
Quix Streams (a windowed aggregation with RocksDB state, changelog topics and exactly-once on a 3-broker cluster,
killed -9 mid-stream), Faust (an agent's table restored from its changelog after kill -9 and after a clean stop)
and kaskade (the Textual TUI, driven in tmux, its screen read with capture-pane)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.e2e.ecosystem.kafka_jars import REPO
from tests.kbus_processes import BrokerProcess, Cluster, wait_for

pytestmark = pytest.mark.integration

APPS = Path(__file__).resolve().parent / "python"


def venv_bin(name: str) -> Path:
    """The venv scripts/python-apps.sh made for `name` (made now if scripts/test.sh has not yet)."""
    out = subprocess.run([str(REPO / "scripts" / "python-apps.sh"), name], capture_output=True, text=True,
                         timeout=900)  # fmt: skip
    assert out.returncode == 0, out.stderr
    return Path(out.stdout.strip().splitlines()[-1])


class App:
    """One run of an app script: its output in a file, started in its own session so kill -9 takes all of it."""

    def __init__(self, argv: list[str], log: Path) -> None:
        self.log = log
        with open(log, "ab") as out:
            self.proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, cwd=log.parent,
                                         start_new_session=True)  # fmt: skip

    def text(self) -> str:
        """Its output so far; an assertion error with the tail of it if the app has exited."""
        text = self.log.read_text(errors="replace")
        if self.proc.poll() is not None:
            raise AssertionError(f"the app exited with {self.proc.returncode}:\n{text[-3000:]}")
        return text

    def freeze_if(self, condition: Callable[[], bool]) -> bool:
        """SIGSTOP the app, and leave it stopped if `condition()` holds then; SIGCONT if not."""
        os.killpg(self.proc.pid, signal.SIGSTOP)
        if condition():
            return True
        os.killpg(self.proc.pid, signal.SIGCONT)
        time.sleep(0.05)
        return False

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def stop(self, timeout: float = 30) -> int:
        """SIGTERM, the app's own clean shutdown; its exit code."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
                tail = self.log.read_text(errors="replace")[-3000:]
                raise AssertionError(f"no clean stop in {timeout}s:\n{tail}") from None
        return self.proc.returncode


@pytest.fixture
def apps() -> Iterator[Callable[[list[str], Path], App]]:
    started: list[App] = []

    def start(argv: list[str], log: Path) -> App:
        started.append(App(argv, log))
        return started[-1]

    yield start
    for a in started:
        a.kill()


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions)])[name].result(30)


Records = dict[int, list[tuple[str, object]]]  # partition -> (key, JSON value) in offset order


def read_committed(bootstrap: str, topic: str, isolation: str = "read_committed") -> Records:
    """Everything committed in `topic` (or everything written, with isolation="read_uncommitted"), per partition,
    up to the end offsets."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False,
                  "isolation.level": isolation, "auto.offset.reset": "earliest"})  # fmt: skip
    try:
        parts = c.list_topics(topic, timeout=10).topics[topic].partitions
        ends = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in parts}
        c.assign([TopicPartition(topic, p, 0) for p in parts])
        out: Records = {p: [] for p in parts}
        done: set[int] = {p for p, end in ends.items() if end == 0}
        deadline = time.monotonic() + 30
        while len(done) < len(parts) and time.monotonic() < deadline:
            for m in c.consume(500, 0.5):
                if m.error() is None:
                    out[m.partition()].append((m.key().decode(), json.loads(m.value())))
                    # the last stable offset can stop short of the end (aborted records, markers): position tells
                    if m.offset() + 1 >= ends[m.partition()] - 1:
                        done.add(m.partition())
            for tp in c.position([TopicPartition(topic, p) for p in parts if p not in done]):
                if tp.offset >= ends[tp.partition]:
                    done.add(tp.partition)
        return out
    finally:
        c.close()


# --- Quix Streams ------------------------------------------------------------------------------------------------

QUIX_KEYS = [f"k{i}" for i in range(6)]
QUIX_PER_KEY = 40  # one record every 250 ms of event time: 10 one-second windows per key


def produce_quix_input(bootstrap: str, topic: str) -> None:
    """Each key's readings at event times 250 ms apart, then one far-future record per key that closes its windows
    (the app emits a window with .final(), when a later record of its key arrives)."""
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    base = 1_700_000_000_000
    for i in range(QUIX_PER_KEY):
        for k, key in enumerate(QUIX_KEYS):
            p.produce(topic, key=key, value=json.dumps({"n": i * 10 + k}), timestamp=base + i * 250)
    for key in QUIX_KEYS:
        p.produce(topic, key=key, value=json.dumps({"n": 0}), timestamp=base + 3_600_000)
    assert p.flush(30) == 0


def per_key(out: Records) -> dict[str, list[object]]:
    """Each key's windows in the order the app emitted them: deterministic, unlike the interleaving of keys from
    different input partitions in one output partition."""
    keys: dict[str, list[object]] = {}
    for records in out.values():
        for key, value in records:
            keys.setdefault(key, []).append(value)
    return keys


def quix_windows(out: Records) -> int:
    return sum(len(v) for v in out.values())


def windows_in_open_transaction(bootstrap: str, topic: str) -> int:
    """Records in `topic` that read_uncommitted sees and read_committed does not (yet)."""
    raw = quix_windows(read_committed(bootstrap, topic, "read_uncommitted"))  # first: a commit between only adds
    return raw - quix_windows(read_committed(bootstrap, topic))


@pytest.fixture
def txn_cluster(tmp_path: Path, zk_connect: str) -> Iterator[Cluster]:
    """3 brokers whose transaction coordinators look for timed-out transactions every second, not every 10 s."""
    c = Cluster(tmp_path, zk_connect)
    for b in c.brokers.values():
        b.overrides["transaction.abort.timed.out.transaction.cleanup.interval.ms"] = "1000"
    try:
        c.start_all()
        yield c
    finally:
        c.stop()


@pytest.mark.slow
def test_quixstreams_exactly_once_window_survives_kill9(txn_cluster: Cluster, tmp_path: Path, apps) -> None:
    python = str(venv_bin("quixstreams") / "python")
    bootstrap = txn_cluster.bootstrap
    for topic in ("quix-in", "quix-out-clean", "quix-out"):
        create_topic(bootstrap, topic, 3)
    produce_quix_input(bootstrap, "quix-in")
    want = len(QUIX_KEYS) * QUIX_PER_KEY // 4

    def run(group: str, output: str, state: Path, sleep_s: float, log: str) -> App:
        argv = [python, str(APPS / "quix_windowed_sum.py"), bootstrap, "quix-in", output, group, str(state)]
        return apps([*argv, str(sleep_s)], tmp_path / log)

    # the clean run: nothing killed
    clean = run("quix-clean", "quix-out-clean", tmp_path / "state-clean", 0, "clean.log")
    wait_for(lambda: quix_windows(read_committed(bootstrap, "quix-out-clean")) >= want, 90, "the clean run's windows")
    assert clean.stop() == 0
    expected = read_committed(bootstrap, "quix-out-clean")

    # the same app killed -9 mid-stream (slowed down so that it is) while a transaction of its holds windows, twice:
    # restarted on its RocksDB state, then on a fresh state dir (another machine), from the changelog topic alone
    def crash(log: str, state: Path) -> None:
        app = run("quix-crash", "quix-out", state, 0.03, log)
        wait_for(lambda: app.text().count("PROCESSED ") >= 80, 90, "the app well into the input")
        wait_for(lambda: app.freeze_if(lambda: windows_in_open_transaction(bootstrap, "quix-out") > 0), 30,
                 "the app frozen with windows in an open transaction")  # fmt: skip
        app.kill()

    crash("crash-1.log", tmp_path / "state")
    crash("crash-2.log", tmp_path / "state")
    last = run("quix-crash", "quix-out", tmp_path / "state-new", 0, "crash-3.log")
    wait_for(lambda: quix_windows(read_committed(bootstrap, "quix-out")) >= want, 90, "the restarted run's windows")
    time.sleep(1)  # anything a duplicate would add lands within a commit interval
    got = read_committed(bootstrap, "quix-out")
    assert last.stop() == 0
    assert "Recovery process complete" in last.log.read_text()  # its state came from the changelog
    assert quix_windows(expected) == want
    assert per_key(got) == per_key(expected), f"{got}\n!=\n{expected}"
    # the killed transactions' windows are in the log, aborted: read_committed skipped them
    assert quix_windows(read_committed(bootstrap, "quix-out", "read_uncommitted")) > want
    # the window state lives in a changelog topic Quix created on kbus
    changelogs = [t for t in AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics
                  if t.startswith("changelog__quix-crash")]  # fmt: skip
    assert changelogs, "no changelog topic"


# --- Faust -------------------------------------------------------------------------------------------------------


def last_table(app: App) -> dict[str, int] | None:
    """The table the app printed last (Faust's worker logs what its app prints: "[...] [WARNING] TABLE {...}")."""
    lines = [ln for ln in app.text().splitlines() if "TABLE " in ln]
    return json.loads(lines[-1].split("TABLE ", 1)[1]) if lines else None


def committed_all(bootstrap: str, group: str, topic: str) -> bool:
    """The group's committed offsets are the end offsets of every partition of `topic`."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        parts = [TopicPartition(topic, p) for p in c.list_topics(topic, timeout=10).topics[topic].partitions]
        ends = {tp.partition: c.get_watermark_offsets(tp, timeout=10)[1] for tp in parts}
        committed = {tp.partition: tp.offset for tp in c.committed(parts, timeout=10)}
        return all(committed[p] == end for p, end in ends.items() if end > 0)
    finally:
        c.close()


@pytest.mark.slow
def test_faust_table_restored_after_kill9_and_clean_stop(broker, tmp_path: Path, apps) -> None:
    python = str(venv_bin("faust-streaming") / "python")
    app_id = f"faust-{time.monotonic_ns()}"
    topic = f"{app_id}-in"
    create_topic(broker.bootstrap, topic, 3)
    argv = [python, str(APPS / "faust_table.py"), app_id, broker.bootstrap, topic, str(tmp_path / "data")]
    p = Producer({"bootstrap.servers": broker.bootstrap})

    def produce(values: dict[str, list[int]]) -> None:
        for key, vs in values.items():
            for v in vs:
                p.produce(topic, key=key, value=str(v))
        assert p.flush(30) == 0

    def table_is(app: App, want: dict[str, int], what: str) -> None:
        wait_for(lambda: last_table(app) == want, 60, f"{what}: table {want} (last: {last_table(app)})")

    first = apps(argv, tmp_path / "run-1.log")
    produce({"a": [1, 2, 3], "b": [10, 20], "c": [100]})
    table_is(first, {"a": 6, "b": 30, "c": 100}, "first run")
    # every input offset committed: a restart re-reads nothing, so its table can come only from the changelog
    wait_for(lambda: committed_all(broker.bootstrap, app_id, topic), 30, "the input offsets committed")
    first.kill()

    second = apps(argv, tmp_path / "run-2.log")
    table_is(second, {"a": 6, "b": 30, "c": 100}, "after kill -9")
    assert "PROCESSED" not in second.text()
    produce({"a": [4], "b": [5], "d": [7]})
    table_is(second, {"a": 10, "b": 35, "c": 100, "d": 7}, "counting on")
    wait_for(lambda: committed_all(broker.bootstrap, app_id, topic), 30, "the input offsets committed")
    assert second.stop() == 0

    third = apps(argv, tmp_path / "run-3.log")
    table_is(third, {"a": 10, "b": 35, "c": 100, "d": 7}, "after a clean stop")
    assert "PROCESSED" not in third.text()
    assert third.stop() == 0


# --- kaskade -----------------------------------------------------------------------------------------------------


class Tmux:
    """A terminal program in a tmux server of its own, on a socket in the test's directory: other tmux servers are
    never touched and nothing is left behind in /tmp/tmux-UID."""

    WIDTH, HEIGHT = 200, 40

    def __init__(self, socket: Path, name: str, command: list[str]) -> None:
        self.base = ["tmux", "-S", str(socket)]
        # COLUMNS and LINES: a detached session's pane can read as 80x24 to the program at its start; Textual (as
        # Python's shutil) takes these first, so the screen is the same wide one on every machine
        command = ["env", f"COLUMNS={self.WIDTH}", f"LINES={self.HEIGHT}", *command]
        size = ["-x", str(self.WIDTH), "-y", str(self.HEIGHT)]
        subprocess.run([*self.base, "new-session", "-d", "-s", name, *size, *command], check=True)

    def keys(self, *keys: str, literal: bool = False) -> None:
        subprocess.run([*self.base, "send-keys", *(["-l"] if literal else []), *keys], check=True)

    def screen(self) -> str:
        return subprocess.run([*self.base, "capture-pane", "-p"], capture_output=True, text=True, check=True).stdout

    def wait_screen(self, pattern: str, timeout: float = 30) -> str:
        """The screen once `pattern` (a regex) shows on it."""
        wait_for(lambda: re.search(pattern, self.screen()), timeout, f"{pattern!r} on the screen:\n{self.screen()}")
        return self.screen()

    def key_until(self, key: str, pattern: str) -> bool:
        """Whether `pattern` shows on the screen; if not, press `key` (a key pressed before a screen of a Textual app
        is ready for it is lost, so the caller repeats this until it is true)."""
        if re.search(pattern, self.screen()):
            return True
        self.keys(key)
        time.sleep(0.3)
        return bool(re.search(pattern, self.screen()))

    def close(self) -> None:
        subprocess.run([*self.base, "kill-server"], capture_output=True)


def type_into_dialog(tmux: Tmux, title: str, text: str) -> bool:
    """Type `text` into the input of the dialog titled `title`; whether the input (the line below) shows it."""
    tmux.keys("C-u")  # Textual's Input: delete everything left of the cursor
    tmux.keys(text, literal=True)
    time.sleep(0.3)
    lines = tmux.screen().splitlines()
    below = [lines[i + 1] for i, line in enumerate(lines[:-1]) if f"─ {title} ─" in line]
    return bool(below) and f" {text} " in below[0]


def test_kaskade_browses_topics_and_groups(broker_factory, tmp_path: Path) -> None:
    # a broker of its own: kaskade describes every topic and group before its first screen, and the session's
    # shared broker holds those of every earlier test (in full suite runs the screen was still blank after 30 s)
    broker: BrokerProcess = broker_factory()
    kaskade = str(venv_bin("kaskade") / "kaskade")
    uid = f"ksk{time.monotonic_ns()}"
    orders, audit, group = f"{uid}-orders", f"{uid}-audit", f"{uid}-readers"
    create_topic(broker.bootstrap, orders, 3)
    create_topic(broker.bootstrap, audit, 2)
    p = Producer({"bootstrap.servers": broker.bootstrap})
    for partition in range(3):
        for i in range(10):
            p.produce(orders, value=f"v{i}", partition=partition)
    assert p.flush(30) == 0
    # a live member of the group, its offsets committed at 4, 5 and 6 of 10: a lag of 15
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest"})  # fmt: skip
    c.subscribe([orders])
    wait_for(lambda: c.poll(0.2) is not None and len(c.assignment()) == 3, 30, "the consumer's assignment")
    c.commit(offsets=[TopicPartition(orders, p, 4 + p) for p in range(3)], asynchronous=False)
    tmux = Tmux(tmp_path / "tmux.sock", uid, [kaskade, "admin", "-b", broker.bootstrap])
    try:
        # the topic list: every topic with its partition count, replicas, in-sync replicas, groups, members, lag
        # (the group columns show "…" until kaskade has described the groups)
        screen = tmux.wait_screen(rf"{re.escape(orders)}\s+3\s+1\s+1\s+1\s+1\s+≈30\s+≈15\s", timeout=60)
        assert re.search(rf"{re.escape(audit)}\s+2\s+1\s+1\s+0\s+0\s+≈0\s+≈0\s", screen), screen
        # the topic's details, its Groups tab: the group, its state, assignor, member and lag
        tmux.keys("/")
        tmux.wait_screen("Filter Topics")
        # keys typed before the dialog's input has the focus are lost: type until the input shows the name
        wait_for(lambda: type_into_dialog(tmux, "Filter Topics", orders), 30, "the filter typed in")
        tmux.keys("Enter")
        tmux.wait_screen(rf"Topics \[\*{re.escape(orders)}\*\]\[1\]")
        wait_for(lambda: tmux.key_until("d", rf"Topic Details \[{re.escape(orders)}\]"), 30, "the topic's details")
        # the tabs: Partitions, Configurations, Groups (l: the next one, round and round)
        wait_for(lambda: tmux.key_until("l", r"Coordinator\s+State\s+Assignor"), 30, "the Groups tab")
        screen = tmux.wait_screen(rf"{re.escape(group)}\s")
        row = re.search(rf"{re.escape(group)}\s+(\S+)\s+(\S+)\s+(\S+)\s+(\d+)\s+(\d+)\s+(\d+)", screen)
        assert row is not None, screen
        assert row.groups() == (f"{broker.bootstrap}/0", "stable", "range", "3", "1", "15"), screen
    finally:
        tmux.close()
        c.close()
