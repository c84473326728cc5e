"""Spark's own Kafka connector (`format("kafka")`, the spark-sql-kafka-0-10 jar) for `kbus spark-submit`.

`--packages org.apache.spark:spark-sql-kafka-0-10_2.13:VERSION` is answered from a local jar cache instead of
Spark's Ivy: the connector and what pyspark's jars/ lacks (kafka-clients, the token provider, commons-pool2) sit in
`<cache>/spark-kafka/VERSION/libs` and go to spark-submit as `--jars`. A missing version is fetched once from Maven
Central with `mvn` (the same layout scripts/kafka-jars.sh uses), so later jobs start without any network.
Nothing here imports pyspark.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

from kbus.common.maven import MavenFailed, MavenMissing, copy_dependencies
from kbus.spark.submit import SubmitError, submit_options_length

CONNECTOR = "org.apache.spark:spark-sql-kafka-0-10_2.13"
TOKEN_PROVIDER = "spark-token-provider-kafka-0-10_2.13"
# pyspark's jars/ already holds these groups; copying them again would put two versions on the classpath
_PROVIDED_GROUPS = (
    "org.apache.spark,org.scala-lang,org.slf4j,org.apache.hadoop,com.google.code.findbugs,"
    "org.xerial.snappy,org.lz4,at.yawk.lz4,com.github.luben"
)


def cache_root(env: Mapping[str, str]) -> Path:
    if env.get("KBUS_CACHE_DIR"):
        return Path(env["KBUS_CACHE_DIR"])
    base = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "kbus"


def take_connector(args: Sequence[str]) -> tuple[list[str], str | None]:
    """Removes the connector's coordinate from spark-submit's --packages (other packages stay for Spark's
    own resolution) and returns the remaining args and the connector version asked for, if any."""
    out = list(args)
    version = None
    n = submit_options_length(out)
    i = 0
    while i < n:
        arg = out[i]
        if arg == "--packages" and i + 1 < n:
            start, value = i + 1, out[i + 1]
        elif arg.startswith("--packages="):
            start, value = i, arg.split("=", 1)[1]
        else:
            i += 1
            continue
        kept = []
        for coord in (c.strip() for c in value.split(",") if c.strip()):
            if coord.startswith(CONNECTOR + ":"):
                version = coord.split(":")[2]
            else:
                kept.append(coord)
        if kept:
            out[start] = ",".join(kept) if start != i else "--packages=" + ",".join(kept)
            i = start + 1
        else:  # nothing left for Spark to resolve: drop the option
            del out[i : start + 1]
            n -= start + 1 - i
    return out, version


def connector_jars(version: str, root: Path) -> list[Path]:
    """The jars of spark-sql-kafka-0-10 VERSION, fetched into `root` the first time."""
    home = root / "spark-kafka" / version
    libs = home / "libs"
    if not (home / ".complete").exists():
        _fetch(version, root, home)
    return sorted(libs.glob("*.jar"))


def _fetch(version: str, root: Path, home: Path) -> None:
    repo = root / "m2"
    try:
        libs = copy_dependencies(home, repo, "spark-kafka", version,
                                 [("org.apache.spark", "spark-sql-kafka-0-10_2.13", version)], _PROVIDED_GROUPS)
    except MavenMissing:
        raise SubmitError(
            f"the Kafka connector {CONNECTOR}:{version} is not in {home} and Maven (mvn) is not installed to "
            "fetch it: apt-get install -y maven"
        ) from None
    except MavenFailed as exc:
        raise SubmitError(f"Maven could not fetch {CONNECTOR}:{version}:\n{exc}") from None
    # the connector and its token provider were excluded with Spark's group above; they are what we came for
    for artifact in ("spark-sql-kafka-0-10_2.13", TOKEN_PROVIDER):
        jar = repo / "org" / "apache" / "spark" / artifact / version / f"{artifact}-{version}.jar"
        shutil.copy2(jar, libs / jar.name)
    (home / ".complete").touch()


def with_connector_jars(args: Sequence[str], jars: Sequence[Path]) -> list[str]:
    """Adds the jars to spark-submit's --jars (merged with the user's own, spark-submit keeps only the last)."""
    out = list(args)
    joined = ",".join(str(j) for j in jars)
    n = submit_options_length(out)
    for i, arg in enumerate(out[:n]):
        if arg == "--jars" and i + 1 < n:
            out[i + 1] = f"{out[i + 1]},{joined}"
            return out
        if arg.startswith("--jars="):
            out[i] = f"{arg},{joined}"
            return out
    return ["--jars", joined, *out]
