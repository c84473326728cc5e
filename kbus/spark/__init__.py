"""PySpark integration: the `kbus` data source, `kbus spark-submit`, and the example pipelines.

pyspark is an optional dependency (`pip install 'kbus[spark]'`), so nothing here imports it at module load.
"""

from __future__ import annotations

import os
import shutil
import sys
import warnings
from typing import Any

FORMAT = "kbus"


def register(spark: Any) -> None:
    """Make `spark.read.format("kbus")` (and readStream/write/writeStream) available in this session."""
    from kbus.spark.datasource import KbusDataSource

    python = getattr(spark.sparkContext, "pythonExec", None)
    # On a cluster the executors' Python is another machine's (spark.pyspark.python) and kbus reaches it through
    # --py-files (kbus spark-submit ships it), so only a local master is expected to run this interpreter.
    local = str(spark.sparkContext.master).startswith("local")
    if local and python and os.path.abspath(shutil.which(python) or python) != os.path.abspath(sys.executable):
        # Reads would fail later, in a worker, with a far less helpful ModuleNotFoundError.
        warnings.warn(
            f"Spark's Python workers run {python!r}, not {sys.executable!r}, so they may lack kbus and pyarrow; "
            f"set PYSPARK_PYTHON={sys.executable} before the session starts (or use kbus.spark.session())",
            stacklevel=2,
        )
    spark.dataSource.register(KbusDataSource)


def session(app_name: str = "kbus", master: str = "local[*]", **conf: str) -> Any:
    """A SparkSession for notebooks and scripts, set up as `kbus spark-submit` sets up jobs, with `kbus` registered.

    Extra Spark settings: session("job", **{"spark.driver.memory": "2g"}).
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    settings = {
        "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": "4",
        "spark.sql.session.timeZone": "UTC",
        **conf,
    }
    builder = SparkSession.builder.appName(app_name).master(master)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    register(spark)
    return spark
