"""Kafka's `simple` share-group assignor (KIP-932; Kafka 4.1+'s SimpleAssignor with its
SimpleHomogeneousAssignmentBuilder), the only value of `group.share.assignors`.

Kafka's rule: with P subscribed partitions and M members, each partition is shared by `ceil(M / P)` members
(the "desired sharing": 1 when there are at least as many partitions as members, so partitions are SPREAD; more
than 1 when members outnumber partitions, so partitions are SHARED), and the resulting `sharing * P` assignments
are dealt out so that members' counts differ by at most one (member i of M gets
`ceil(S*P*(i+1)/M) - ceil(S*P*i/M)`). Balance first, then stickiness: a member keeps what its current target
assignment holds unless that partition is over-shared or the member has too many; partitions short of members
go round-robin to the members short of partitions.

Differences from Kafka, said plainly: members are numbered in member-id order (Kafka uses its map's order), so
which member gets which partition differs, not the counts. When members subscribe to different topics Kafka runs a
separate heterogeneous builder; kbus applies the same rule per topic among that topic's subscribers (balanced per
topic, not across topics).

Pure function: subscriptions, partition counts and current targets in, the new target assignment out.
"""

from __future__ import annotations

from collections.abc import Mapping

from kbus.server.coordinator.assignors import Assignment

TP = tuple[str, int]


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _assign_homogeneous(member_ids: list[str], targets: list[TP],
                        current: Mapping[str, Assignment]) -> dict[str, set[TP]]:
    """The homogeneous builder's steps over one set of target partitions and the members that all subscribe to
    them; returns member id -> partitions (every member present, possibly empty)."""
    m, p = len(member_ids), len(targets)
    by_member: dict[str, list[TP]] = {mid: [] for mid in member_ids}
    if p == 0 or m == 0:
        return {mid: set() for mid in member_ids}
    sharing = _ceil_div(m, p)
    total = sharing * p
    desired = {mid: _ceil_div(total * (i + 1), m) - _ceil_div(total * i, m) for i, mid in enumerate(member_ids)}
    target_set = set(targets)
    by_partition: dict[TP, list[str]] = {tp: [] for tp in targets}
    # 1. keep the current assignment of partitions still subscribed and still existing
    for mid in member_ids:
        for topic, parts in sorted(current.get(mid, {}).items()):
            for part in sorted(parts):
                if (topic, part) in target_set:
                    by_member[mid].append((topic, part))
                    by_partition[(topic, part)].append(mid)

    def revoke(mid: str, tp: TP) -> None:
        by_member[mid].remove(tp)
        by_partition[tp].remove(mid)

    # 2. revoke over-shared partitions, from overfilled members first
    for tp in targets:
        holders = by_partition[tp]
        for overfilled_first in (True, False):
            for mid in list(holders):
                if len(holders) <= sharing:
                    break
                if (len(by_member[mid]) > desired[mid]) == overfilled_first:
                    revoke(mid, tp)
    # 3. revoke from members that still have too many
    for mid in member_ids:
        while len(by_member[mid]) > desired[mid]:
            revoke(mid, by_member[mid][-1])
    # 4. partitions short of members go round-robin to the members short of partitions; a partition that no unfilled
    # member can take (they all hold it already) stays short, as in Kafka
    unfilled = [mid for mid in member_ids if len(by_member[mid]) < desired[mid]]
    i = 0
    for tp in targets:
        holders = by_partition[tp]
        tried = 0
        while len(holders) < sharing and unfilled and tried < len(unfilled):
            mid = unfilled[i % len(unfilled)]
            if mid in holders:
                i += 1
                tried += 1
                continue
            by_member[mid].append(tp)
            holders.append(mid)
            tried = 0
            if len(by_member[mid]) >= desired[mid]:
                unfilled.remove(mid)
            else:
                i += 1
        if not unfilled:
            break
    return {mid: set(tps) for mid, tps in by_member.items()}


def simple_share_assignment(subscriptions: Mapping[str, tuple[str, ...]], counts: Mapping[str, int],
                            current: Mapping[str, Assignment]) -> dict[str, Assignment]:
    """member id -> subscribed topic names; topic -> partition count (absent or 0: not assignable); member id ->
    current target assignment. Returns the new target assignment of every member."""
    member_ids = sorted(subscriptions)
    owned: dict[str, set[TP]] = {mid: set() for mid in member_ids}
    subs = {frozenset(t for t in subscriptions[mid] if counts.get(t, 0) > 0) for mid in member_ids}
    if len(subs) == 1:
        topics = sorted(next(iter(subs)))
        targets = [(t, p) for t in topics for p in range(counts[t])]
        owned = _assign_homogeneous(member_ids, targets, current)
    else:
        for topic in sorted({t for s in subs for t in s}):
            subscribers = [mid for mid in member_ids if topic in subscriptions[mid]]
            cur = {mid: {topic: current[mid][topic]} for mid in subscribers
                   if mid in current and topic in current[mid]}
            for mid, tps in _assign_homogeneous(subscribers, [(topic, p) for p in range(counts[topic])],
                                                cur).items():
                owned[mid] |= tps
    out: dict[str, Assignment] = {}
    for mid, tps in owned.items():
        by_topic: dict[str, set[int]] = {}
        for topic, part in tps:
            by_topic.setdefault(topic, set()).add(part)
        out[mid] = {t: frozenset(ps) for t, ps in by_topic.items()}
    return out
