"""`kbus consumer-groups` as users run it, against a real kbus broker and real group members."""

from __future__ import annotations

import subprocess
import time
import uuid

import pytest

from tests.e2e.test_cli import KBUS, create, kbus, topic_name

pytestmark = pytest.mark.integration


def groups(*args: str) -> subprocess.CompletedProcess[str]:
    return kbus("consumer-groups", *args)


def consume(bootstrap: str, topic: str, group: str, n: int) -> str:
    res = kbus("console-consumer", "--bootstrap-server", bootstrap, "--topic", topic, "--group", group,
               "--from-beginning", "--max-messages", str(n), "--timeout-ms", "20000")
    assert res.returncode == 0, res.stderr
    return res.stdout


def rows(stdout: str) -> list[list[str]]:
    lines = [line for line in stdout.splitlines() if line.strip()]
    return [line.split() for line in lines[1:]]


def test_describe_lag_reset_and_delete(broker) -> None:
    b = broker.bootstrap
    t = topic_name()
    create(b, t, 1)
    kbus("console-producer", "--bootstrap-server", b, "--topic", t, stdin="a\nb\nc\nd\n")
    g = f"g-{uuid.uuid4().hex[:6]}"
    assert consume(b, t, g, 3) == "a\nb\nc\n"

    listed = groups("--bootstrap-server", b, "--list")
    assert g in listed.stdout.splitlines()
    with_state = groups("--bootstrap-server", b, "--list", "--state")
    assert with_state.stdout.splitlines()[0].split() == ["GROUP", "STATE"]
    assert [g, "Empty"] in [line.split() for line in with_state.stdout.splitlines()]

    desc = groups("--bootstrap-server", b, "--describe", "--group", g)
    assert desc.returncode == 0, desc.stderr
    assert desc.stdout.startswith("\nGROUP ")
    assert desc.stdout.splitlines()[1].split() == [
        "GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"
    ]
    assert rows(desc.stdout) == [[g, t, "0", "3", "4", "1", "-", "-", "-"]]
    assert f"Consumer group '{g}' has no active members." in desc.stderr

    dry = groups("--bootstrap-server", b, "--reset-offsets", "--group", g, "--topic", t, "--to-earliest", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert rows(dry.stdout) == [[g, t, "0", "0"]]
    assert rows(groups("--bootstrap-server", b, "--describe", "--group", g).stdout)[0][3] == "3"  # unchanged

    done = groups("--bootstrap-server", b, "--reset-offsets", "--group", g, "--topic", t, "--to-earliest", "--execute")
    assert done.returncode == 0, done.stderr
    # The next member of the group re-reads from the start.
    assert consume(b, t, g, 1) == "a\n"
    shifted = groups("--bootstrap-server", b, "--reset-offsets", "--group", g, "--topic", f"{t}:0", "--shift-by", "2",
                     "--execute")
    assert rows(shifted.stdout) == [[g, t, "0", "3"]]
    assert consume(b, t, g, 1) == "d\n"

    deleted = groups("--bootstrap-server", b, "--delete", "--group", g)
    assert deleted.returncode == 0, deleted.stderr
    assert deleted.stdout.strip() == f"Deletion of requested consumer groups ('{g}') was successful."
    gone = groups("--bootstrap-server", b, "--describe", "--group", g)
    assert gone.returncode == 1
    assert gone.stderr.strip() == f"Error: Consumer group '{g}' does not exist."


def test_active_members_state_and_refusals(broker) -> None:
    b = broker.bootstrap
    t = topic_name()
    create(b, t, 2)
    g = f"g-{uuid.uuid4().hex[:6]}"
    members = [
        subprocess.Popen(
            [KBUS, "console-consumer", "--bootstrap-server", b, "--topic", t, "--group", g, "--timeout-ms", "30000"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        for _ in range(2)
    ]
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            state = groups("--bootstrap-server", b, "--describe", "--group", g, "--state")
            fields = rows(state.stdout)
            if fields and fields[0][-2:] == ["Stable", "2"]:
                break
            time.sleep(0.5)
        else:
            pytest.fail(f"group never became Stable with 2 members: {state.stdout} {state.stderr}")
        assert state.stdout.splitlines()[1].split()[:4] == ["GROUP", "COORDINATOR", "(ID)", "ASSIGNMENT-STRATEGY"]

        mem = groups("--bootstrap-server", b, "--describe", "--group", g, "--members", "--verbose")
        assert mem.returncode == 0, mem.stderr
        member_rows = rows(mem.stdout)
        assert len(member_rows) == 2
        assert sorted(r[-1] for r in member_rows) == [f"{t}(0)", f"{t}(1)"]
        assert all(r[3] == "console-consumer" and r[4] == "1" for r in member_rows)

        busy = groups("--bootstrap-server", b, "--reset-offsets", "--group", g, "--topic", t, "--to-earliest",
                      "--execute")
        assert busy.returncode == 1
        assert "can only be reset if the group" in busy.stderr and "Stable" in busy.stderr
        refused = groups("--bootstrap-server", b, "--delete", "--group", g)
        assert refused.returncode == 1
        assert "The group is not empty." in refused.stderr
    finally:
        for m in members:
            m.terminate()
        for m in members:
            m.wait(30)
