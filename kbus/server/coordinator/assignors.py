"""The server-side partition assignors of the consumer group protocol (KIP-848; Kafka's
`org.apache.kafka.coordinator.group.assignor` UniformAssignor and RangeAssignor), chosen by `group.consumer.assignors`
and the client's `group.remote.assignor`. Pure functions: members' subscriptions and current target assignments in,
the new target assignment out.

Differences from Kafka, said plainly: the uniform assignor here is one sticky, balanced algorithm for homogeneous
and heterogeneous subscriptions (Kafka has two builders); the outcome has the same properties (every subscribed
partition assigned once, members' counts within one of each other when subscriptions allow, partitions stay where
they were when that keeps the balance) but is not partition-for-partition Kafka's. The range assignor gives each
topic's subscribers contiguous ranges, co-partitioned across topics, without Kafka's stickiness.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

# topic name -> partitions
Assignment = dict[str, frozenset[int]]


@dataclass(frozen=True, slots=True)
class MemberSpec:
    subscribed: frozenset[str]
    # the member's current target assignment (what stickiness keeps)
    current: Mapping[str, frozenset[int]] = field(default_factory=dict)
    rack_id: str | None = None
    instance_id: str | None = None


# member id -> spec; topic name -> partition count; result: member id -> assignment
AssignorFn = Callable[[Mapping[str, MemberSpec], Mapping[str, int]], dict[str, Assignment]]


def _to_assignment(owned: dict[str, set[tuple[str, int]]]) -> dict[str, Assignment]:
    out: dict[str, Assignment] = {}
    for member_id, tps in owned.items():
        by_topic: dict[str, set[int]] = {}
        for topic, partition in tps:
            by_topic.setdefault(topic, set()).add(partition)
        out[member_id] = {t: frozenset(ps) for t, ps in by_topic.items()}
    return out


def uniform_assign(members: Mapping[str, MemberSpec], topics: Mapping[str, int]) -> dict[str, Assignment]:
    """Sticky and balanced: keep current owners, give free partitions to the least-loaded subscriber, then move
    partitions from the most- to the least-loaded subscriber until no move narrows the gap."""
    owned: dict[str, set[tuple[str, int]]] = {m: set() for m in members}
    subscribers: dict[str, list[str]] = {
        t: sorted(m for m, spec in members.items() if t in spec.subscribed) for t in sorted(topics)
    }
    taken: set[tuple[str, int]] = set()
    for member_id in sorted(members):
        spec = members[member_id]
        for topic, parts in spec.current.items():
            if topic not in spec.subscribed or topic not in topics:
                continue
            for p in parts:
                tp = (topic, p)
                if p < topics[topic] and tp not in taken:
                    taken.add(tp)
                    owned[member_id].add(tp)
    # free partitions, topics with the fewest subscribers first (they have the least choice)
    for topic in sorted(subscribers, key=lambda t: (len(subscribers[t]), t)):
        subs = subscribers[topic]
        if not subs:
            continue
        for p in range(topics[topic]):
            tp = (topic, p)
            if tp in taken:
                continue
            target = min(subs, key=lambda m: (len(owned[m]), m))
            owned[target].add(tp)
            taken.add(tp)
    # balance: move one partition at a time from a member to a less-loaded subscriber of its topic
    moved = True
    while moved:
        moved = False
        for donor in sorted(owned, key=lambda m: (-len(owned[m]), m)):
            for tp in sorted(owned[donor]):
                candidates = [m for m in subscribers[tp[0]] if len(owned[m]) < len(owned[donor]) - 1]
                if candidates:
                    receiver = min(candidates, key=lambda m: (len(owned[m]), m))
                    owned[donor].discard(tp)
                    owned[receiver].add(tp)
                    moved = True
                    break
            if moved:
                break
    return _to_assignment(owned)


def range_assign(members: Mapping[str, MemberSpec], topics: Mapping[str, int]) -> dict[str, Assignment]:
    """Per topic, its subscribers (ordered by member id) take contiguous ranges; the first `n % k` take one more.
    Members subscribed to the same topics get the same partition numbers of each (co-partitioning)."""
    owned: dict[str, set[tuple[str, int]]] = {m: set() for m in members}
    for topic in sorted(topics):
        subs = sorted(m for m, spec in members.items() if topic in spec.subscribed)
        if not subs:
            continue
        n = topics[topic]
        quota, extra = divmod(n, len(subs))
        start = 0
        for i, member_id in enumerate(subs):
            count = quota + (1 if i < extra else 0)
            owned[member_id].update((topic, p) for p in range(start, start + count))
            start += count
    return _to_assignment(owned)


# the names group.consumer.assignors accepts (kbus.common.broker_config.parse_assignors) name these
ASSIGNORS: dict[str, AssignorFn] = {"uniform": uniform_assign, "range": range_assign}
