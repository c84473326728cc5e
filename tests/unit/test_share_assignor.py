"""Kafka's `simple` share assignor (kbus.server.coordinator.share_assignor): partitions spread when they outnumber
the members, shared when the members outnumber them, balanced within one, sticky where balance allows."""

from __future__ import annotations

from kbus.server.coordinator.share_assignor import simple_share_assignment


def counts_of(result: dict[str, dict[str, frozenset[int]]]) -> dict[str, int]:
    return {m: sum(len(ps) for ps in a.values()) for m, a in result.items()}


def holders(result: dict[str, dict[str, frozenset[int]]], topic: str, partition: int) -> int:
    return sum(1 for a in result.values() if partition in a.get(topic, frozenset()))


def test_more_partitions_than_members_are_spread() -> None:
    r = simple_share_assignment({"a": ("t",), "b": ("t",)}, {"t": 4}, {})
    assert counts_of(r) == {"a": 2, "b": 2}
    assert r["a"]["t"] | r["b"]["t"] == {0, 1, 2, 3} and not r["a"]["t"] & r["b"]["t"]
    r = simple_share_assignment({m: ("t",) for m in "abc"}, {"t": 7}, {})
    assert sorted(counts_of(r).values()) == [2, 2, 3]
    assert all(holders(r, "t", p) == 1 for p in range(7))


def test_fewer_partitions_than_members_are_shared() -> None:
    # 3 members, 1 partition: all share it (the Java share consumer's usual case)
    r = simple_share_assignment({m: ("t",) for m in "abc"}, {"t": 1}, {})
    assert r == {m: {"t": frozenset({0})} for m in "abc"}
    # 3 members, 2 partitions: each partition shared by ceil(3/2) = 2 members, counts 2/1/1
    r = simple_share_assignment({m: ("t",) for m in "abc"}, {"t": 2}, {})
    assert sorted(counts_of(r).values()) == [1, 1, 2]
    assert holders(r, "t", 0) == 2 and holders(r, "t", 1) == 2
    # 5 members, 2 partitions: sharing 3, 6 assignments over 5 members
    r = simple_share_assignment({m: ("t",) for m in "abcde"}, {"t": 2}, {})
    assert sorted(counts_of(r).values()) == [1, 1, 1, 1, 2]
    assert holders(r, "t", 0) == 3 and holders(r, "t", 1) == 3


def test_sticky_when_a_member_joins_and_leaves() -> None:
    before = simple_share_assignment({"a": ("t",), "b": ("t",)}, {"t": 4}, {})
    after = simple_share_assignment({"a": ("t",), "b": ("t",), "c": ("t",)}, {"t": 4}, before)
    assert sorted(counts_of(after).values()) == [1, 1, 2]
    # a and b only lose partitions, never gain ones they did not have
    assert after["a"]["t"] <= before["a"]["t"] and after["b"]["t"] <= before["b"]["t"]
    assert set().union(*(a["t"] for a in after.values())) == {0, 1, 2, 3}
    # c leaves: a and b keep theirs and pick up c's
    gone = simple_share_assignment({"a": ("t",), "b": ("t",)}, {"t": 4}, {"a": after["a"], "b": after["b"]})
    assert gone["a"]["t"] >= after["a"]["t"] and gone["b"]["t"] >= after["b"]["t"]
    assert counts_of(gone) == {"a": 2, "b": 2}


def test_unknown_topics_empty_subscriptions_and_heterogeneous() -> None:
    assert simple_share_assignment({"a": ("nope",)}, {}, {}) == {"a": {}}
    assert simple_share_assignment({}, {"t": 3}, {}) == {}
    # per topic: u (2 partitions) spread over a and b; v (1 partition) shared by b and c
    r = simple_share_assignment({"a": ("u",), "b": ("u", "v"), "c": ("v",)}, {"u": 2, "v": 1}, {})
    assert r["a"].get("v") is None and r["c"].get("u") is None
    assert holders(r, "u", 0) == 1 and holders(r, "u", 1) == 1 and holders(r, "v", 0) == 2
    # a removed topic's partitions go away from the current assignment
    r = simple_share_assignment({"a": ("t",)}, {"t": 2}, {"a": {"gone": frozenset({0}), "t": frozenset({5})}})
    assert r == {"a": {"t": frozenset({0, 1})}}
