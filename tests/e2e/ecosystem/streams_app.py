"""The Kafka Streams applications (the Maven module in streams/ beside this file), built per kafka-streams version
into .cache/streams/<version>/ (classes + libs); scripts/test.sh builds them before the tests."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.e2e.ecosystem.kafka_jars import REPO

POM = Path(__file__).resolve().parent / "streams" / "pom.xml"
# the newest 3.9 and the newest 4.x whose kafka-streams Maven Central serves here (4.4.0's is not there)
STREAMS_VERSIONS = ("3.9.2", "4.1.1")


def build(version: str) -> str:
    """Compile the applications against kafka-streams `version` (Maven's incremental build: quick once done) and
    return their java classpath."""
    cmd = ["mvn", "-B", "-q", "-f", str(POM), f"-Dmaven.repo.local={REPO / '.cache' / 'm2'}",
           f"-Dkafka.version={version}", "compile", "dependency:copy-dependencies"]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    if out.returncode != 0:
        raise RuntimeError(f"building the Streams applications ({version}) failed:\n{out.stdout}{out.stderr}")
    home = REPO / ".cache" / "streams" / version
    return f"{home / 'classes'}:{home / 'libs'}/*"
