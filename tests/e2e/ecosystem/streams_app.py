"""The Kafka Streams applications (the Maven module in streams/ beside this file), built per kafka-streams version
into .cache/streams/<version>/ (classes + libs); scripts/test.sh builds them before the tests."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.ecosystem.kafka_jars import REPO
from tests.e2e.ecosystem.maven_build import mvn_compile

POM = Path(__file__).resolve().parent / "streams" / "pom.xml"
# the newest 3.9 and the newest 4.x whose kafka-streams Maven Central serves here (4.4.0's is not there)
STREAMS_VERSIONS = ("3.9.2", "4.1.1")


def build(version: str) -> str:
    """Compile the applications against kafka-streams `version` (once per change of the module: maven_build.py) and
    return their java classpath."""
    home = REPO / ".cache" / "streams" / version
    mvn_compile(POM, version, home, "the Streams applications")
    return f"{home / 'classes'}:{home / 'libs'}/*"
