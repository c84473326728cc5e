"""Jars fetched from Maven Central into a cache, the one way kbus does it for the runtimes it wraps (Spark's Kafka
connector for `kbus spark-submit`, Kafka Connect for `kbus connect-*`): a throwaway pom listing the artifacts, and
maven-dependency-plugin's copy-dependencies into a fresh `libs` folder beside it."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

Artifact = tuple[str, str, str]  # groupId, artifactId, version


class MavenMissing(Exception):
    """Maven (mvn) is not installed."""


class MavenFailed(Exception):
    """Maven ran and failed; the message is the tail of its output."""


def copy_dependencies(
    home: Path, repo: Path, artifact_id: str, version: str, deps: Sequence[Artifact], exclude_groups: str = ""
) -> Path:
    """Write `home`/pom.xml (kbus.cache:`artifact_id`:`version`, depending on `deps`) and copy their runtime
    dependencies into a fresh `home`/libs, with `repo` as Maven's local repository. Returns the libs folder."""
    mvn = shutil.which("mvn")
    if mvn is None:
        raise MavenMissing("mvn")
    home.mkdir(parents=True, exist_ok=True)
    (home / "pom.xml").write_text(
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>\n'
        f"<groupId>kbus.cache</groupId><artifactId>{artifact_id}</artifactId><version>{version}</version>"
        "<packaging>pom</packaging>\n<dependencies>\n"
        + "".join(
            f"<dependency><groupId>{g}</groupId><artifactId>{a}</artifactId><version>{v}</version></dependency>\n"
            for g, a, v in deps
        )
        + "</dependencies></project>\n"
    )
    libs = home / "libs"
    shutil.rmtree(libs, ignore_errors=True)
    cmd = [
        mvn, "-B", "-q", "-f", str(home / "pom.xml"), f"-Dmaven.repo.local={repo}",
        "org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies",
        f"-DoutputDirectory={libs}", "-DincludeScope=runtime",
    ]  # fmt: skip
    if exclude_groups:
        cmd.append(f"-DexcludeGroupIds={exclude_groups}")
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    if out.returncode != 0:
        raise MavenFailed("\n".join((out.stdout + out.stderr).strip().splitlines()[-5:]))
    return libs
