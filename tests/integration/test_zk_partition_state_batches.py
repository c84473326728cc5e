"""The controller's partition-state creation in ZooKeeper multi ops (KafkaZkClient.create_partition_states), against
a real ZooKeeper: a batch is one transaction, a fenced or failing batch writes nothing of itself, and a batch that
meets an existing znode is written again partition by partition without touching what was there."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient

from kbus.zk import client as zk_client
from kbus.zk import paths
from kbus.zk.client import ControllerMovedError, KafkaZkClient
from kbus.zk.codec import LeaderAndIsr, TopicAssignment

pytestmark = [pytest.mark.zookeeper, pytest.mark.integration]


@pytest.fixture
def kzk(zk_connect: str, raw_zk: KazooClient) -> Iterator[KafkaZkClient]:
    client = KafkaZkClient.connect(zk_connect, 10.0, 10.0)
    client.ensure_persistent_paths()
    yield client
    client.close()


def make_topic(kzk: KafkaZkClient, name: str, partitions: int) -> None:
    kzk.create_topic(name, TopicAssignment({p: [1] for p in range(partitions)}, uuid.uuid4()), {})


def state(leader: int = 1, epoch: int = 1) -> LeaderAndIsr:
    return LeaderAndIsr(leader, 0, (leader,), epoch, 0)


def test_states_are_written_one_transaction_per_batch(kzk, raw_zk, monkeypatch):
    monkeypatch.setattr(zk_client, "CREATE_STATES_BATCH", 4)
    make_topic(kzk, "t", 10)
    written = kzk.create_partition_states([("t", p, state()) for p in range(10)])
    assert [w is not None and w.zk_version == 0 for w in written] == [True] * 10
    czxids = []
    for p in range(10):
        data, stat = raw_zk.get(paths.partition_state("t", p))
        body = json.loads(data)
        assert body == {"controller_epoch": 1, "leader": 1, "version": 1, "leader_epoch": 0, "isr": [1]}
        assert raw_zk.get(paths.topic_partition("t", p))[1].czxid == stat.czxid  # parent in the same transaction
        czxids.append(stat.czxid)
    # batches of 4: partitions 0-3, 4-7 and 8-9 each created by one ZooKeeper transaction
    assert len(set(czxids[0:4])) == len(set(czxids[4:8])) == len(set(czxids[8:10])) == 1
    assert len(set(czxids)) == 3


def test_a_fenced_batch_writes_nothing(kzk, raw_zk):
    """A controller whose epoch moved on (its /controller_epoch check fails) must leave no znode of its batch,
    not even the /partitions/<p> parents."""
    make_topic(kzk, "fenced", 6)
    kzk.try_become_controller(1)
    _, version = kzk.get_controller_epoch()
    with pytest.raises(ControllerMovedError):
        kzk.create_partition_states([("fenced", p, state()) for p in range(6)], epoch_version=version + 1)
    assert raw_zk.get_children(paths.topic_partitions("fenced")) == []
    written = kzk.create_partition_states([("fenced", p, state()) for p in range(6)], epoch_version=version)
    assert all(w is not None for w in written)
    assert sorted(raw_zk.get_children(paths.topic_partitions("fenced")), key=int) == [str(p) for p in range(6)]


def test_a_batch_meeting_an_existing_state_is_retried_partition_by_partition(kzk, raw_zk, monkeypatch):
    """Partition 2's state exists already (an earlier controller died midway): its batch's multi fails as a whole,
    then every other partition is written one by one and partition 2 keeps the state it had. Running the whole
    creation again (a new controller acting on the same view) changes nothing."""
    monkeypatch.setattr(zk_client, "CREATE_STATES_BATCH", 4)
    make_topic(kzk, "half", 8)
    first = kzk.create_partition_states([("half", 2, state(leader=7))])
    assert first[0] is not None
    items = [("half", p, state()) for p in range(8)]
    written = kzk.create_partition_states(items)
    assert [w is None for w in written] == [p == 2 for p in range(8)]
    assert json.loads(raw_zk.get(paths.partition_state("half", 2))[0])["leader"] == 7
    for p in (0, 1, 3, 4, 5, 6, 7):
        assert json.loads(raw_zk.get(paths.partition_state("half", p))[0])["leader"] == 1
    versions = {p: raw_zk.get(paths.partition_state("half", p))[1].version for p in range(8)}
    assert kzk.create_partition_states(items) == [None] * 8  # idempotent: nothing overwritten
    assert {p: raw_zk.get(paths.partition_state("half", p))[1].version for p in range(8)} == versions


def test_states_of_a_deleted_topic_are_not_created(kzk, raw_zk):
    """The topic went between the controller's decision and its write: nothing is created under it."""
    written = kzk.create_partition_states([("gone", p, state()) for p in range(3)])
    assert written == [None, None, None]
    assert raw_zk.exists(paths.topic("gone")) is None


def test_missing_states_are_watched_for_and_present_ones_read(kzk, raw_zk):
    """get_partition_states(absent_likely=True): exists first, pipelined; a state created meanwhile is read, and
    a missing one fires the watch when the controller creates it."""
    make_topic(kzk, "w", 3)
    kzk.create_partition_states([("w", 1, state(leader=4))])
    fired: list[str] = []
    got = kzk.get_partition_states([("w", p) for p in range(3)], watch=lambda e: fired.append(e.path),
                                   absent_likely=True)  # fmt: skip
    assert got[0] is None and got[2] is None and got[1] is not None and got[1].leader == 4
    kzk.create_partition_states([("w", 0, state()), ("w", 2, state())])
    from tests.kbus_processes import wait_for

    wait_for(lambda: {paths.partition_state("w", 0), paths.partition_state("w", 2)} <= set(fired), timeout=5,
             what="the creation watches")  # fmt: skip


def test_the_controller_watches_the_states_it_created(stores, raw_zk):
    """The controller's view skips watching a new topic's states for their creation (it writes them itself) and
    reads them once written: a later change by someone else (a leader's ISR write) still reaches it through
    the watch, not only through the periodic reconciliation (switched off here)."""
    from tests.kbus_processes import wait_for

    store = stores(1, reconcile_interval_s=600.0)
    assert store.is_controller()
    store.create_topic("watched", 3, 1, {})
    wait_for(lambda: all(store.partition_state("watched", p) is not None for p in range(3)), timeout=10,
             what="the states in the view")  # fmt: skip
    wait_for(store._events.empty, timeout=10, what="the re-reads that arm the watches")
    path = paths.partition_state("watched", 1)
    _, stat = raw_zk.get(path)
    body = {"controller_epoch": 1, "leader": 1, "version": 1, "leader_epoch": 5, "isr": [1]}
    raw_zk.set(path, json.dumps(body).encode(), version=stat.version)
    wait_for(lambda: store.partition_state("watched", 1).leader_epoch == 5, timeout=5, what="the change seen")


def test_a_pipelined_state_read_goes_through_the_polling_handler(kzk, monkeypatch):
    """The broker's kazoo client waits on its socket with poll(2) (kbus.zk.poll_handler), not with a new epoll
    instance per wait as kazoo's default handler does; a pipelined read of many states still answers each one."""
    from kazoo.handlers import utils

    from kbus.zk.poll_handler import PollingHandler

    assert isinstance(kzk.zk.handler, PollingHandler)
    make_topic(kzk, "polled", 50)
    kzk.create_partition_states([("polled", p, state(epoch=p)) for p in range(50)])
    created: list[object] = []
    real = utils.selectors.DefaultSelector
    monkeypatch.setattr(utils.selectors, "DefaultSelector", lambda: created.append(None) or real())
    read = kzk.get_partition_states([("polled", p) for p in range(50)] + [("polled", 50)], watch=lambda _e: None)
    assert [s.controller_epoch if s else None for s in read] == [*range(50), None]
    assert not created


def test_peeked_writes_are_the_zxids_of_the_states_a_read_returns(kzk, monkeypatch):
    """peek_writes (multiRead, no watches) answers the zxid of each state's last write, as get_partition_states
    reads it, missing znodes as None, across several multiRead batches (peek_requests, MULTI_READ_BATCH paths
    each); a state written again has a new one."""
    monkeypatch.setattr(zk_client, "MULTI_READ_BATCH", 7)
    make_topic(kzk, "peeked", 20)
    kzk.create_partition_states([("peeked", p, state(epoch=p)) for p in range(18)])  # 18 and 19: none yet
    items = [("peeked", p) for p in range(20)] + [("no-such-topic", 0)]

    def peek(of: list[tuple[str, int]]) -> list[int | None]:
        out: list[int | None] = []
        for request in kzk.peek_requests(of):
            peeked = kzk.peek_writes(request)
            assert peeked is not None and len(peeked) == request.size
            out += peeked
        return out

    read = kzk.get_partition_states(items)
    peeked = peek(items)
    assert peeked == [s.zk_mzxid if s else None for s in read]
    assert peeked[18] is None and peeked[20] is None and all(z > 0 for z in peeked[:18])
    written = kzk.update_partition_states([("peeked", 3, read[3].with_leader(1, (1,), 1))])[0]
    again = peek(items)
    assert again[3] == written.zk_mzxid > peeked[3] and again[:3] == peeked[:3]
    # the requests are made once for the same items (paths built and serialized), again for other items
    requests = kzk.peek_requests(items)
    assert kzk.peek_requests(list(items)) is requests and [r.size for r in requests] == [7, 7, 7]
    assert kzk.peek_requests(items[:7]) is not requests
    assert peek(items[:2]) == peeked[:2]


def test_a_topics_znodes_are_deleted_in_batches(kzk, raw_zk, monkeypatch):
    """delete_topic_znodes removes the partitions' znodes in multi ops (DELETE_STATES_BATCH partitions each, here
    7), not one request per znode; a batch that meets a znode it does not expect (a child it does not name, a state
    never written) fails whole, and the recursive delete after it removes the rest. Assignment, config and the
    deletion marker go too."""
    monkeypatch.setattr(zk_client, "DELETE_STATES_BATCH", 7)
    make_topic(kzk, "doomed", 20)
    kzk.create_partition_states([("doomed", p, state()) for p in range(19)])  # 19: no state written
    raw_zk.ensure_path("/brokers/topics/doomed/partitions/19")
    raw_zk.create("/brokers/topics/doomed/partitions/3/unexpected", b"")  # fails the first batch
    kzk.mark_topic_for_deletion("doomed")
    make_topic(kzk, "kept", 2)
    kzk.create_partition_states([("kept", p, state()) for p in range(2)])
    order = raw_zk.get_children("/brokers/topics/doomed/partitions")  # as delete_topic_znodes will list them
    deletes: list[str] = []
    real_delete = kzk.zk.delete
    monkeypatch.setattr(kzk.zk, "delete", lambda path, *a, **kw: deletes.append(path) or real_delete(path, *a, **kw))
    kzk.delete_topic_znodes("doomed")
    assert raw_zk.exists("/brokers/topics/doomed") is None
    assert raw_zk.exists("/config/topics/doomed") is None
    assert raw_zk.exists("/admin/delete_topics/doomed") is None
    assert sorted(raw_zk.get_children("/brokers/topics/kept/partitions")) == ["0", "1"]
    # the batches follow ZooKeeper's order of the children; the ones holding 3 (a child) or 19 (no state) failed
    # and the recursive delete met only their partitions (one request per znode), the others went in their multi
    batches = [set(order[i : i + 7]) for i in range(0, 20, 7)]
    failed = set().union(*(b for b in batches if "3" in b or "19" in b))
    one_by_one = {p.split("/partitions/")[1].split("/")[0] for p in deletes if "/partitions/" in p}
    assert one_by_one == failed and len(failed) <= 14
