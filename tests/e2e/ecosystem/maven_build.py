"""A Maven module of the tests (java/, streams/ beside this file) compiled, with its dependencies copied, into
.cache/<name>/<version>/ (classes + libs), once: Maven runs again only when the module's files or the version
changed since its last successful build there.

Maven's own incremental build decides the same, but only after Maven has started: a JVM, the project model, both
plugins (`dependency:copy-dependencies` compares every jar), 10-20 s of CPU a call on this box. scripts/test.sh
builds each module before the tests, and the tests asked again per session, per xdist worker, and (Kafka
Streams) per test."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

from tests.e2e.ecosystem.kafka_jars import REPO

STAMP = ".kbus-build"  # in the output dir: the digest of what its classes and libs were built from


def digest(module: Path, version: str) -> str:
    """Over the version and every file of the module (path and bytes), so any edit rebuilds."""
    h = hashlib.sha256(f"kafka.version={version}\n".encode())
    for f in sorted(p for p in module.rglob("*") if p.is_file()):
        h.update(f"{f.relative_to(module)}\n".encode())
        h.update(f.read_bytes())
    return h.hexdigest()


def mvn_compile(pom: Path, version: str, home: Path, what: str) -> None:
    """`mvn compile dependency:copy-dependencies` of `pom` for `version` into `home` (the pom's output dir) unless
    `home` holds a complete build of these very files."""
    stamp = home / STAMP
    want = digest(pom.parent, version)
    built = stamp.is_file() and stamp.read_text() == want
    if built and any((home / "classes").rglob("*.class")) and any((home / "libs").glob("*.jar")):
        return
    stamp.unlink(missing_ok=True)  # a build that fails half-way leaves no stamp behind
    cmd = ["mvn", "-B", "-q", "-f", str(pom), f"-Dmaven.repo.local={REPO / '.cache' / 'm2'}",
           f"-Dkafka.version={version}", "compile", "dependency:copy-dependencies"]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    if out.returncode != 0:
        raise RuntimeError(f"building {what} ({version}) failed:\n{out.stdout}\n{out.stderr}")
    stamp.write_text(want)
