"""PySpark integration: the `kbus` data source, `kbus spark-submit`, and the example pipelines.

pyspark is an optional dependency (`pip install 'kbus[spark]'`), so nothing here imports it at module load.
"""

from __future__ import annotations

from typing import Any

FORMAT = "kbus"


def register(spark: Any) -> None:
    """Make `spark.read.format("kbus")` (and readStream/write/writeStream) available in this session."""
    from kbus.spark.datasource import KbusDataSource

    spark.dataSource.register(KbusDataSource)
