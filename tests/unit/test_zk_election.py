"""The controller's leader/ISR rules."""

from kbus.zk.codec import LeaderAndIsr
from kbus.zk.election import imbalanced_brokers, initial_state, preferred_leader, reconcile


def test_initial_state_first_live_replica_leads():
    assert initial_state([2, 1, 3], {1, 2, 3}, 5) == LeaderAndIsr(2, 0, (2, 1, 3), 5)
    assert initial_state([2, 1, 3], {1, 3}, 5) == LeaderAndIsr(1, 0, (1, 3), 5)
    assert initial_state([2], {1}, 5) is None


def test_nothing_to_do_when_all_alive():
    assert reconcile([1, 2], LeaderAndIsr(1, 0, (1, 2), 1, 4), {1, 2}, 2) is None


def test_dead_follower_leaves_isr_and_epoch_bumps():
    new = reconcile([1, 2, 3], LeaderAndIsr(1, 3, (1, 2, 3), 1, 4), {1, 3}, 2)
    assert new == LeaderAndIsr(1, 4, (1, 3), 2, 4)


def test_dead_leader_replaced_by_first_live_isr_member_in_assignment_order():
    new = reconcile([1, 2, 3], LeaderAndIsr(1, 0, (3, 2, 1), 1, 0), {2, 3}, 2)
    assert new is not None and new.leader == 2 and set(new.isr) == {2, 3} and new.leader_epoch == 1


def test_out_of_sync_replica_never_leads_unless_unclean():
    cur = LeaderAndIsr(1, 0, (1,), 1, 0)
    offline = reconcile([1, 2], cur, {2}, 2)
    assert offline is not None and offline.leader == -1 and offline.isr == (1,)
    assert reconcile([1, 2], offline, {2}, 2) is None  # stays offline, no churn
    back = reconcile([1, 2], offline, {1, 2}, 2)
    assert back is not None and back.leader == 1 and back.isr == (1,)
    unclean = reconcile([1, 2], cur, {2}, 2, unclean=True)
    assert unclean is not None and unclean.leader == 2 and unclean.isr == (2,)


def test_all_isr_dead_keeps_one_member():
    new = reconcile([1, 2, 3], LeaderAndIsr(2, 5, (1, 2), 1, 0), {3}, 2)
    assert new is not None and new.leader == -1 and new.isr == (2,) and new.leader_epoch == 6


def test_preferred_leader_only_when_alive_and_in_sync():
    cur = LeaderAndIsr(2, 3, (2, 1), 1, 7)
    assert preferred_leader([1, 2], cur, {1, 2}, 4) == LeaderAndIsr(1, 4, (2, 1), 4, 7)
    assert preferred_leader([1, 2], LeaderAndIsr(2, 3, (2,), 1), {1, 2}, 4) is None  # not in sync yet
    assert preferred_leader([1, 2], cur, {2}, 4) is None  # not alive
    assert preferred_leader([2, 1], cur, {1, 2}, 4) is None  # already leads


def test_imbalance_per_broker_percentage():
    replicas = {("t", p): ([1, 2] if p % 2 == 0 else [2, 1]) for p in range(20)}
    balanced = {tp: r[0] for tp, r in replicas.items()}
    assert imbalanced_brokers(replicas, balanced, 10) == set()
    one_off = {**balanced, ("t", 0): 2}  # broker 1 leads 9 of its 10: exactly 10% is tolerated
    assert imbalanced_brokers(replicas, one_off, 10) == set()
    two_off = {**one_off, ("t", 2): 2}
    assert imbalanced_brokers(replicas, two_off, 10) == {1}
