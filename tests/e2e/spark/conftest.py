"""Spark test fixtures: ONE local SparkSession for the whole test session (start-up costs ~6 s on this box)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest

from tests.e2e.ecosystem import jvm_tmp


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    # Every Python process Spark starts must be this interpreter (pyarrow, kbus), on loopback only.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    from pyspark.sql import SparkSession

    import kbus.spark

    # the JVM's temporary files (artifacts-*, liblz4-java-*.so) and Spark's local dir (blockmgr-*) under this
    # process's pytest base temp dir, not /tmp
    tmp = tmp_path_factory.mktemp("spark-tmp")
    session = (
        SparkSession.builder.master("local[2]")
        .appName("kbus-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "1g")
        .config("spark.sql.warehouse.dir", str(tmp_path_factory.mktemp("warehouse")))
        .config("spark.local.dir", str(tmp))
        .config("spark.driver.extraJavaOptions", " ".join(jvm_tmp.options(tmp)))
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    kbus.spark.register(session)
    yield session
    session.stop()
