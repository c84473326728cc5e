"""Partition reassignment as Kafka's controller runs it (KIP-455, ZooKeeper mode), as pure functions of a
partition's assignment, its leader/ISR state and the live brokers:

1. start: the assignment becomes target + the replicas being removed, with adding_replicas / removing_replicas
   recorded in the topic znode; new replicas open their logs and fetch from the leader (the leader adds them to
   the ISR once caught up);
2. complete, once every target replica is in the ISR: a leader outside the target hands over to the first
   target replica in the ISR, the removed replicas leave the ISR, then the assignment becomes the target;
3. cancel: back to the original replicas (the ones not being added), same steps.
Nothing acknowledged is lost: the leader only moves to a replica that is in the ISR."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from kbus.zk.codec import NO_LEADER, LeaderAndIsr


@dataclass(frozen=True)
class PartitionAssignment:
    replicas: list[int]  # during a reassignment: target first, then the replicas being removed
    adding: list[int]
    removing: list[int]

    @property
    def in_progress(self) -> bool:
        return bool(self.adding or self.removing)

    @property
    def target(self) -> list[int]:
        return [b for b in self.replicas if b not in self.removing]

    @property
    def original(self) -> list[int]:
        return [b for b in self.replicas if b not in self.adding]


def start(current: PartitionAssignment, target: Sequence[int]) -> PartitionAssignment:
    """A new target; a reassignment already under way is replaced, counting from its original replicas."""
    original = current.original
    full = list(target) + [b for b in original if b not in target]
    return PartitionAssignment(full, [b for b in target if b not in original], [b for b in original if b not in target])


def cancel(current: PartitionAssignment) -> PartitionAssignment:
    """Back to the original replicas: the added ones are dropped once the ISR no longer needs them."""
    original = current.original
    return PartitionAssignment(original + [b for b in current.replicas if b not in original], [],
                               [b for b in current.replicas if b not in original])  # fmt: skip


def validate_target(target: Sequence[int], brokers: Collection[int]) -> str | None:
    """Kafka's checks of a requested replica list: the error name, or None."""
    if not target:
        return "INVALID_REPLICA_ASSIGNMENT"
    if len(set(target)) != len(target) or any(b < 0 for b in target):
        return "INVALID_REPLICA_ASSIGNMENT"
    if any(b not in brokers for b in target):
        return "INVALID_REPLICA_ASSIGNMENT"
    return None


def completion(
    assignment: PartitionAssignment, state: LeaderAndIsr, live: Collection[int], controller_epoch: int
) -> LeaderAndIsr | None:
    """The final leader/ISR once every target replica is in sync; None while some are still catching up (or no
    target replica could lead)."""
    target = assignment.target
    if any(b not in state.isr for b in target):
        return None
    isr = [b for b in state.isr if b in target]
    leader = state.leader
    if leader == NO_LEADER or leader not in target or leader not in live:
        candidates = [b for b in target if b in isr and b in live]
        if not candidates:
            return None
        leader = candidates[0]
    if leader == state.leader and list(state.isr) == isr:
        return state  # nothing to write: only the assignment changes
    return state.with_leader(leader, isr, controller_epoch)
