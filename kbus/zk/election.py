"""The controller's leader and ISR decisions (Kafka's PartitionStateMachine / ReplicaStateMachine rules),
as pure functions of a partition's replicas, its current state and the live brokers."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from kbus.zk.codec import NO_LEADER, LeaderAndIsr


def initial_state(replicas: Sequence[int], live: Collection[int], controller_epoch: int) -> LeaderAndIsr | None:
    """A new partition: the first live assigned replica leads and every live replica is in sync.
    None when no replica is alive (the partition waits, as Kafka's NewPartition does)."""
    live_replicas = [b for b in replicas if b in live]
    if not live_replicas:
        return None
    return LeaderAndIsr(live_replicas[0], 0, tuple(live_replicas), controller_epoch)


def settled(current: LeaderAndIsr, live: frozenset[int] | set[int]) -> bool:
    """A live leader with every in-sync replica live: reconcile() leaves the partition as it is. The controller asks
    this of every partition first (most need nothing, and it is cheaper than reconcile's lists)."""
    return current.leader in live and live.issuperset(current.isr)  # NO_LEADER (-1) is never a live broker


def reconcile(
    replicas: Sequence[int],
    current: LeaderAndIsr,
    live: frozenset[int] | set[int],
    controller_epoch: int,
    unclean: bool = False,
) -> LeaderAndIsr | None:
    """The state the partition should move to given which brokers are alive, or None if it is fine as it is.

    - dead followers leave the ISR (the leader stays);
    - a dead (or missing) leader is replaced by the first assigned replica that is alive and in the ISR;
    - with no such replica the partition goes offline (leader -1) and keeps its last ISR member, so that broker
      is elected when it comes back; only `unclean` allows an out-of-sync live replica to lead.
    Every change bumps the leader epoch, as the controller's removeReplicasFromIsr / elections do.
    """
    if settled(current, live):
        return None
    live_isr = [b for b in current.isr if b in live]
    if current.leader != NO_LEADER and current.leader in live:
        return current.with_leader(current.leader, live_isr, controller_epoch)
    candidates = [b for b in replicas if b in live and b in current.isr]
    if candidates:
        return current.with_leader(candidates[0], live_isr, controller_epoch)
    if unclean:
        live_replicas = [b for b in replicas if b in live]
        if live_replicas:
            return current.with_leader(live_replicas[0], [live_replicas[0]], controller_epoch)
    if current.leader == NO_LEADER:
        return None
    # never shrink the ISR to nothing: the last member is the only safe future leader
    last = (current.leader,) if current.leader in current.isr else current.isr[-1:]
    return current.with_leader(NO_LEADER, last, controller_epoch)


def preferred_leader(replicas: Sequence[int], current: LeaderAndIsr, live: Collection[int], controller_epoch: int
                     ) -> LeaderAndIsr | None:  # fmt: skip
    """Move leadership back to the preferred replica (the first assigned) once it is alive and in sync."""
    if not replicas:
        return None
    preferred = replicas[0]
    if current.leader == preferred or preferred not in live or preferred not in current.isr:
        return None
    return current.with_leader(preferred, current.isr, controller_epoch)


def imbalanced_brokers(
    assignments: dict[tuple[str, int], Sequence[int]], leaders: dict[tuple[str, int], int], percentage: int
) -> set[int]:
    """Brokers leading less than their share: more than `percentage`% of the partitions they are preferred for
    are led by someone else (leader.imbalance.per.broker.percentage)."""
    preferred_count: dict[int, int] = {}
    not_leading: dict[int, int] = {}
    for tp, replicas in assignments.items():
        if not replicas:
            continue
        preferred = replicas[0]
        preferred_count[preferred] = preferred_count.get(preferred, 0) + 1
        if leaders.get(tp) != preferred:
            not_leading[preferred] = not_leading.get(preferred, 0) + 1
    return {b for b, n in preferred_count.items() if not_leading.get(b, 0) * 100 > percentage * n}


# ElectLeaders outcomes (Kafka error names; the API layer maps them to codes)
ELECTION_NOT_NEEDED = "ELECTION_NOT_NEEDED"
PREFERRED_LEADER_NOT_AVAILABLE = "PREFERRED_LEADER_NOT_AVAILABLE"
ELIGIBLE_LEADERS_NOT_AVAILABLE = "ELIGIBLE_LEADERS_NOT_AVAILABLE"


def requested_election(
    kind: str, replicas: Sequence[int], current: LeaderAndIsr, live: Collection[int], controller_epoch: int
) -> LeaderAndIsr | str:
    """An ElectLeaders request for one partition (kind "preferred" or "unclean"): the new state, or why there is
    none (Kafka's ZK controller rules: a preferred election needs the preferred replica alive and in sync; an
    unclean one only runs for a partition without a live leader and takes the first live replica, in sync or not)."""
    if kind == "preferred":
        if replicas and current.leader == replicas[0]:
            return ELECTION_NOT_NEEDED
        moved = preferred_leader(replicas, current, live, controller_epoch)
        return PREFERRED_LEADER_NOT_AVAILABLE if moved is None else moved
    if current.leader != NO_LEADER and current.leader in live:
        return ELECTION_NOT_NEEDED
    in_sync = [b for b in replicas if b in live and b in current.isr]
    if in_sync:
        return current.with_leader(in_sync[0], [b for b in current.isr if b in live], controller_epoch)
    live_replicas = [b for b in replicas if b in live]
    if not live_replicas:
        return ELIGIBLE_LEADERS_NOT_AVAILABLE
    return current.with_leader(live_replicas[0], [live_replicas[0]], controller_epoch)
