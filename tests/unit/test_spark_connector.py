"""`kbus spark-submit --packages <Spark's Kafka connector>`: the coordinate leaves --packages for --jars."""

from __future__ import annotations

from pathlib import Path

from kbus.spark.connector import CONNECTOR, cache_root, take_connector, with_connector_jars

C = f"{CONNECTOR}:4.2.0"


def test_connector_taken_from_packages_others_kept() -> None:
    assert take_connector(["--packages", C, "job.py"]) == (["job.py"], "4.2.0")
    assert take_connector([f"--packages=a:b:1,{C}", "job.py"]) == (["--packages=a:b:1", "job.py"], "4.2.0")
    assert take_connector(["--packages", f"{C},a:b:1", "--master", "local", "job.py"]) == (
        ["--packages", "a:b:1", "--master", "local", "job.py"],
        "4.2.0",
    )
    # the job's own arguments are never touched
    assert take_connector(["job.py", "--packages", C]) == (["job.py", "--packages", C], None)


def test_jars_merged_with_the_users() -> None:
    jars = [Path("/c/a.jar"), Path("/c/b.jar")]
    assert with_connector_jars(["job.py"], jars) == ["--jars", "/c/a.jar,/c/b.jar", "job.py"]
    assert with_connector_jars(["--jars", "x.jar", "job.py"], jars) == ["--jars", "x.jar,/c/a.jar,/c/b.jar", "job.py"]
    assert with_connector_jars(["--jars=x.jar", "job.py"], jars) == ["--jars=x.jar,/c/a.jar,/c/b.jar", "job.py"]


def test_cache_root() -> None:
    assert cache_root({"KBUS_CACHE_DIR": "/k"}) == Path("/k")
    assert cache_root({"XDG_CACHE_HOME": "/x"}) == Path("/x/kbus")
