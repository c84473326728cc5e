"""KBUS_LOG_CONFIG: a real broker logging through a logging.yaml, and a bad file refused in one line."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.kbus_processes import REPO, free_port, wait_for_port

pytestmark = pytest.mark.integration

KAFKA_LINE = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}\] (INFO|WARNING|ERROR|DEBUG) .+ \([\w.]+\)$")


def test_broker_logs_through_the_log_config_file(tmp_path: Path) -> None:
    cfg = tmp_path / "logging.yaml"
    cfg.write_text(
        (REPO / "config/logging.yaml")
        .read_text()
        .replace("  # server_file:", "  server_file:")
        .replace("  #   ", "    ")
        .replace("handlers: [stdout]", "handlers: [stdout, server_file]")
    )
    port = free_port()
    env = {**os.environ, "KBUS_LOG_CONFIG": str(cfg), "KBUS_LOG_DIR": str(tmp_path / "logs")}
    props = tmp_path / "server.properties"
    props.write_text(f"listeners=PLAINTEXT://127.0.0.1:{port}\nlog.dirs={tmp_path / 'data'}\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "kbus.server", str(props)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
    )
    try:
        wait_for_port(port, 30, proc)
        proc.send_signal(signal.SIGTERM)
        stdout, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert proc.returncode == 0
    file_lines = (tmp_path / "logs/server.log").read_text().splitlines()
    assert any("[KafkaServer id=0] started" in line for line in file_lines)
    # every record is in Kafka's layout; the start banner's `key = value` lines continue its record tab-indented,
    # as in Kafka's server.log
    records: list[str] = []
    for line in file_lines:
        if line.startswith("\t") and records:
            records[-1] += line
        else:
            records.append(line)
    assert records and all(KAFKA_LINE.match(record) for record in records), records
    # the same lines on stdout (the journal under systemd)
    assert stdout.decode().splitlines() == file_lines
    # application logs stay out of the data directory
    assert (tmp_path / "data").is_dir() and not list((tmp_path / "data").rglob("server.log*"))


def test_bad_log_config_is_one_line(tmp_path: Path) -> None:
    cfg = tmp_path / "logging.yaml"
    cfg.write_text("version: 1\nroot: {handlers: [nope]}\n")
    props = tmp_path / "server.properties"
    props.write_text(f"log.dirs={tmp_path / 'data'}\n")
    done = subprocess.run(
        [sys.executable, "-m", "kbus.server", str(props)],
        env={**os.environ, "KBUS_LOG_CONFIG": str(cfg)}, capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 1
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"ERROR log config {cfg} is invalid:")
    assert not (tmp_path / "data").exists()
