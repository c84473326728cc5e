"""tests/e2e/ecosystem/maven_build.py: Maven runs for a module only when its files or the version changed since the
last successful build into that output dir, or that build's classes or jars are gone."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.e2e.ecosystem import maven_build


@pytest.fixture
def module(tmp_path: Path) -> Path:
    m = tmp_path / "module"
    (m / "src" / "main" / "java").mkdir(parents=True)
    (m / "pom.xml").write_text("<project/>")
    (m / "src" / "main" / "java" / "A.java").write_text("class A {}")
    return m


@pytest.fixture
def mvn_runs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[list[str]]:
    """Each Maven command line run; the fake build writes a class and a jar into tmp_path/out."""
    runs: list[list[str]] = []

    def fake_run(cmd: list[str], **_: object) -> subprocess.CompletedProcess[str]:
        runs.append(cmd)
        out = tmp_path / "out"
        (out / "classes").mkdir(parents=True, exist_ok=True)
        (out / "libs").mkdir(parents=True, exist_ok=True)
        (out / "classes" / "A.class").write_bytes(b"\xca\xfe")
        (out / "libs" / "dep.jar").write_bytes(b"PK")
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(maven_build.subprocess, "run", fake_run)
    return runs


def test_maven_runs_once_until_a_file_or_the_version_changes(
    module: Path, mvn_runs: list[list[str]], tmp_path: Path
) -> None:
    out = tmp_path / "out"
    maven_build.mvn_compile(module / "pom.xml", "3.9.2", out, "m")
    maven_build.mvn_compile(module / "pom.xml", "3.9.2", out, "m")
    assert len(mvn_runs) == 1 and "-Dkafka.version=3.9.2" in mvn_runs[0]
    (module / "src" / "main" / "java" / "A.java").write_text("class A { int x; }")  # an edit
    maven_build.mvn_compile(module / "pom.xml", "3.9.2", out, "m")
    assert len(mvn_runs) == 2
    (module / "src" / "main" / "java" / "B.java").write_text("class B {}")  # a new file
    maven_build.mvn_compile(module / "pom.xml", "3.9.2", out, "m")
    assert len(mvn_runs) == 3
    maven_build.mvn_compile(module / "pom.xml", "4.1.1", out, "m")  # another version into the same dir
    assert len(mvn_runs) == 4
    maven_build.mvn_compile(module / "pom.xml", "4.1.1", out, "m")
    assert len(mvn_runs) == 4


def test_maven_runs_again_when_the_output_is_gone(module: Path, mvn_runs: list[list[str]], tmp_path: Path) -> None:
    out = tmp_path / "out"
    maven_build.mvn_compile(module / "pom.xml", "3.9.2", out, "m")
    (out / "classes" / "A.class").unlink()
    maven_build.mvn_compile(module / "pom.xml", "3.9.2", out, "m")
    assert len(mvn_runs) == 2
    (out / "libs" / "dep.jar").unlink()
    maven_build.mvn_compile(module / "pom.xml", "3.9.2", out, "m")
    assert len(mvn_runs) == 3


def test_a_failed_build_leaves_no_stamp(module: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / maven_build.STAMP).write_text("an old build's digest")

    def failing(cmd: list[str], **_: object) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(cmd, 1, "", "[ERROR] COMPILATION ERROR")

    monkeypatch.setattr(maven_build.subprocess, "run", failing)
    with pytest.raises(RuntimeError, match=r"building m \(3\.9\.2\) failed"):
        maven_build.mvn_compile(module / "pom.xml", "3.9.2", out, "m")
    assert not (out / maven_build.STAMP).exists()
