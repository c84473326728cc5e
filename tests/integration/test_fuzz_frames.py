"""Socket-level fuzzing of a real broker process (tests/fuzzing.py): a few thousand mutated ApiVersions, Metadata,
Produce, Fetch, ListOffsets, CreateTopics, JoinGroup and OffsetCommit frames with a fixed seed. The broker must not
crash or hang, must keep serving, must refuse every CRC-valid garbage batch, must log no traceback, and every
acknowledged record must read back byte for byte. A second run sweeps every other API kbus serves with null in
nullable fields. bench/run fuzz runs the same fuzzer for 100,000+ frames."""

from __future__ import annotations

import pytest

from tests import fuzzing

pytestmark = pytest.mark.integration

FRAMES = 3000
SEED = 20261124


def test_fuzzed_frames_do_not_crash_wedge_or_poison_the_broker(broker_factory):
    broker = broker_factory()
    fuzzing.prepare(broker.bootstrap)
    host, port = broker.bootstrap.split(":")
    res = fuzzing.run(host, int(port), FRAMES, SEED, broker_pid=broker.proc.pid, frame_timeout=15, null_rate=0.1)
    summary = res.summary()
    assert broker.alive, broker.log_text()[-3000:]
    assert res.hangs == 0 and res.health_failures == 0, summary
    assert fuzzing.healthy(host, int(port))
    # the fuzzer really exercised the broker: refused frames, answered ones, garbage and acknowledged produces
    assert res.closed > 100 and res.answered > 1000, summary
    assert sum(res.garbage_refused.values()) > 50 and not res.garbage_accepted, summary
    assert len(res.acked) > 100, summary
    assert fuzzing.verify_acked(broker.bootstrap, res.acked) == []
    assert fuzzing.broker_log_problems(broker.log_text()) == []


def test_null_where_the_schema_allows_it_never_reaches_a_handler_as_a_type_error(broker_factory):
    """Every other API kbus serves, mostly well formed, half of the nullable fields null: all answered or refused,
    none logged as an unexpected error."""
    broker = broker_factory()
    fuzzing.prepare(broker.bootstrap)
    host, port = broker.bootstrap.split(":")
    res = fuzzing.run(host, int(port), 1500, SEED + 1, frame_timeout=15,
                      apis={**fuzzing.APIS, **fuzzing.OTHER_APIS}, null_rate=0.5, mutate_rate=0.2)
    assert res.hangs == 0 and res.answered > 800 and not res.garbage_accepted, res.summary()
    assert broker.alive and fuzzing.healthy(host, int(port))
    assert fuzzing.broker_log_problems(broker.log_text()) == []
