"""scripts/apt-install.sh (used by setup.sh) waits for the apt lock instead of failing; apt-get is a fake here."""

import os
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def fake_apt(tmp_path: Path, busy_calls: int, message: str) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    counter = tmp_path / "calls"
    apt = bin_dir / "apt-get"
    apt.write_text(
        "#!/usr/bin/env bash\n"
        f'echo "$*" >> {counter}\n'
        f"n=$(wc -l < {counter})\n"
        f'if [ "$n" -le {busy_calls} ]; then echo "{message}" >&2; exit 100; fi\n'
    )
    apt.chmod(0o755)
    return bin_dir


def run(tmp_path: Path, bin_dir: Path, wait_s: str = "30") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "KBUS_APT_POLL_S": "0.1",
           "KBUS_APT_WAIT_S": wait_s}
    return subprocess.run([str(REPO / "scripts" / "apt-install.sh"), "zookeeper", "kcat"], env=env,
                          capture_output=True, text=True, timeout=60, check=False)


def test_waits_while_another_process_holds_the_lock(tmp_path: Path) -> None:
    lock = "E: Could not get lock /var/lib/apt/lists/lock. It is held by process 4242 (apt-get)"
    res = run(tmp_path, fake_apt(tmp_path, 2, lock))
    assert res.returncode == 0, res.stderr
    calls = (tmp_path / "calls").read_text().splitlines()
    assert len(calls) == 4 and "update" in calls[2] and "install -y -qq zookeeper kcat" in calls[3]
    assert res.stderr.count("waiting for the apt lock (held by process 4242 (apt-get))") == 2


def test_other_failures_are_not_retried(tmp_path: Path) -> None:
    res = run(tmp_path, fake_apt(tmp_path, 5, "E: Unable to locate package zookeeper"))
    assert res.returncode != 0 and "Unable to locate package" in res.stderr
    assert len((tmp_path / "calls").read_text().splitlines()) == 1


def test_gives_up_after_the_wait_bound(tmp_path: Path) -> None:
    res = run(tmp_path, fake_apt(tmp_path, 1000, "E: Could not get lock /var/lib/dpkg/lock-frontend"), wait_s="1")
    assert res.returncode != 0 and "Could not get lock" in res.stderr.splitlines()[-1]


def test_pyproject_license_is_an_spdx_expression() -> None:
    """PEP 639: `license = "SPDX"`; the `{text = ...}` table is deprecated by setuptools (removal announced), and
    the string form needs setuptools >= 77 at build time."""
    import tomllib

    meta = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert meta["project"]["license"] == "Apache-2.0"
    assert "setuptools>=77" in meta["build-system"]["requires"]
