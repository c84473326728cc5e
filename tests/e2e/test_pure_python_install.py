"""`pip install` of kbus on a machine without a C compiler installs pure Python (setup.py skips its C extensions
and mypyc), and that kbus serves Produce and Fetch; where a compiler works (this venv, from scripts/setup.sh) the
hot-path modules are the compiled ones, so the rest of the suite tests them."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import sysconfig
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer

from tests.kbus_processes import BrokerProcess

REPO = Path(__file__).resolve().parents[2]
HOT_MODULES = [
    "kbus.protocol.codec", "kbus.protocol.record_batch", "kbus.server.network.socket_server",
    "kbus.server.replication.fetch_session",
]  # fmt: skip


def _copy_of_the_source(dest: Path) -> Path:
    """The tracked files as they are now (no .venv, no build/, no compiled .so)."""
    files = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout.split(b"\0")
    for name in filter(None, files):
        src = REPO / os.fsdecode(name)
        if src.is_file():
            target = dest / os.fsdecode(name)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(src.read_bytes())
    return dest


def test_the_development_install_runs_the_compiled_hot_path() -> None:
    """scripts/setup.sh's editable install compiles setup.py's modules where a compiler works (as on CI), so the
    other tests run what a wheel ships; KBUS_PURE_PYTHON=1 at install time opts out."""
    if os.environ.get("KBUS_PURE_PYTHON", "") not in ("", "0"):
        pytest.skip("KBUS_PURE_PYTHON is set: this install is pure Python by choice")
    for name in HOT_MODULES:
        path = importlib.import_module(name).__file__ or ""
        assert path.endswith(sysconfig.get_config_var("EXT_SUFFIX")), f"{name} is not compiled ({path})"


def test_without_a_compiler_pip_installs_pure_python_that_serves(tmp_path: Path) -> None:
    source = _copy_of_the_source(tmp_path / "src")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=60)
    python = str(venv / "bin" / "python")
    # kbus's dependencies, setuptools, mypy and pip come from the test's own venv (read-only, appended to the path):
    # no download; only kbus itself is built and installed into the throwaway venv
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    Path(site, "test-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    env = {**os.environ, "CC": "/bin/false"}  # a compiler that fails everything it is given
    env.pop("KBUS_PURE_PYTHON", None)
    install = subprocess.run(
        [python, "-m", "pip", "install", "-v", "--no-deps", "--no-build-isolation", "--no-index", str(source)],
        capture_output=True, text=True, env=env, timeout=300, check=False,
    )
    assert install.returncode == 0, install.stdout[-3000:] + install.stderr[-3000:]
    assert "no working C compiler" in install.stdout + install.stderr
    installed = subprocess.run(
        [python, "-c", "import kbus, kbus.protocol.record_scan as r, kbus.server.network.socket_server as n; "
                       "print(kbus.__file__, n.__file__, r.COMPILED)"],
        capture_output=True, text=True, cwd=tmp_path, timeout=60, check=True,
    ).stdout.split()  # fmt: skip
    assert installed[0].startswith(site) and installed[1].endswith("socket_server.py") and installed[2] == "False"
    assert not list(Path(site, "kbus").rglob("*.so"))

    broker = BrokerProcess(tmp_path / "broker", python=python).start()
    try:
        topic = f"pure-{uuid.uuid4().hex[:8]}"
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
        for i in range(3):
            producer.produce(topic, f"v{i}".encode())
        assert producer.flush(30) == 0
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": topic, "auto.offset.reset": "earliest"})
        consumer.subscribe([topic])
        got = []
        try:
            for _ in range(60):
                msg = consumer.poll(0.5)
                if msg is not None and not msg.error():
                    got.append(msg.value())
                if len(got) == 3:
                    break
        finally:
            consumer.close()
        assert got == [b"v0", b"v1", b"v2"]
    finally:
        broker.stop()
