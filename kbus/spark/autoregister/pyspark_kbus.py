"""Auto-registration hook: Spark imports every top-level module named pyspark_* found on its workers' Python
path and registers its `DefaultSource` under DefaultSource.name(). `kbus spark-submit` puts this directory on
PYTHONPATH, so jobs can use format("kbus") without calling kbus.spark.register(spark)."""

from kbus.spark.datasource import KbusDataSource as DefaultSource

__all__ = ["DefaultSource"]
