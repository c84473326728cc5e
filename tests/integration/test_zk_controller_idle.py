"""The ZooKeeper controller's event thread at rest: a batch of its own timers that brings no change does not walk
every partition again (Controller.act), while anything ZooKeeper announces is still acted on."""

from __future__ import annotations

import pytest

from tests.kbus_processes import wait_for

pytestmark = [pytest.mark.zookeeper, pytest.mark.integration]


def test_timer_batches_that_change_nothing_skip_the_controllers_walk(stores, monkeypatch):
    store = stores(1, reconcile_interval_s=0.05)
    assert store.is_controller()
    store.create_topic("settled", 4, 1, {})
    wait_for(lambda: all(store.partition_state("settled", p) is not None for p in range(4)), timeout=10,
             what="the first states")  # fmt: skip
    acts: list[int] = []
    real_act = store._controller.act
    monkeypatch.setattr(store._controller, "act", lambda epoch: (acts.append(1), real_act(epoch))[1])
    batches = store._generation
    wait_for(lambda: store._generation >= batches + 20, timeout=20, what="20 timer batches")
    # at most the batch that confirms nothing is left to do after the creation's own batches
    assert len(acts) <= 2
    acts.clear()
    store.create_topic("announced", 2, 1, {})  # a watch event: the controller acts and gives it leaders
    wait_for(lambda: all(store.partition_state("announced", p) is not None for p in range(2)), timeout=10,
             what="the new topic's states")  # fmt: skip
    assert acts
    assert store.partition_state("announced", 1).leader == 1
