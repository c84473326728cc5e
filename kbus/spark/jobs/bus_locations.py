"""The ABC bus-location pipeline: per trip and window, latest position, update count and distance travelled.

    kbus spark-submit kbus/spark/jobs/bus_locations.py --config kbus/spark/jobs/bus_locations.yaml \
        [--bootstrap-server HOST:PORT] [--available-now]

Input: topic abc-bus-location, key = trip code, value = "lat, lon" (the seed's Fleet producer). Output, for every
(trip, window) a micro-batch changed: a record on the stats topic (key = trip code, value = JSON) and a Parquet row
under <path>/batch_id=N. The streaming query runs in update mode; readers of the Parquet output keep, per trip and
window, the row of the highest batch_id (see latest_stats()).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

DEFAULT_CONFIG = Path(__file__).with_suffix(".yaml")
EARTH_RADIUS_KM = 6371.0088


class JobConfigError(ValueError):
    pass


@dataclass(frozen=True)
class JobSpec:
    name: str
    input_options: dict[str, str]
    window: str
    watermark: str
    topic_options: dict[str, str] | None
    parquet_path: str | None
    checkpoint: str
    trigger: dict[str, Any] = field(default_factory=lambda: {"processingTime": "10 seconds"})


def _section(doc: dict[str, object], key: str) -> dict[str, object]:
    value = doc.get(key) or {}
    if not isinstance(value, dict):
        raise JobConfigError(f"'{key}' must be a mapping")
    return value


def _options(section: dict[str, object], where: str) -> dict[str, str]:
    options = section.get("options") or {}
    if not isinstance(options, dict):
        raise JobConfigError(f"'{where}.options' must be a mapping")
    return {str(k): str(v) for k, v in options.items()}


def load_job(path: str | Path, bootstrap_server: str | None = None, available_now: bool = False) -> JobSpec:
    """Read and check the YAML job description; command-line overrides win over the file."""
    try:
        doc = yaml.safe_load(Path(path).read_text())
    except OSError as e:
        raise JobConfigError(f"cannot read job description {path}: {e.strerror}") from None
    except yaml.YAMLError as e:
        raise JobConfigError(f"{path} is not valid YAML: {e}") from None
    if not isinstance(doc, dict):
        raise JobConfigError(f"{path}: expected a mapping at the top level")
    source = _options(_section(doc, "input"), "input")
    outputs = _section(doc, "outputs")
    topic = _options(_section(outputs, "topic"), "outputs.topic") if outputs.get("topic") else None
    parquet = _section(outputs, "parquet").get("path") if outputs.get("parquet") else None
    if topic is None and parquet is None:
        raise JobConfigError("at least one of outputs.topic and outputs.parquet is needed")
    if topic is not None and "topic" not in topic:
        raise JobConfigError("outputs.topic.options.topic (the topic to write to) is missing")
    if not any(k in source for k in ("subscribe", "subscribePattern", "assign")):
        raise JobConfigError("input.options needs subscribe (e.g. abc-bus-location)")
    if not doc.get("checkpoint"):
        raise JobConfigError("'checkpoint' (a directory for the query's offsets and state) is missing")
    if bootstrap_server:
        source["kafka.bootstrap.servers"] = bootstrap_server
        if topic is not None:
            topic["kafka.bootstrap.servers"] = bootstrap_server
    window = _section(doc, "window")
    trigger = {"availableNow": True} if available_now else dict(_section(doc, "trigger") or {})
    return JobSpec(
        name=str(doc.get("name", "abc-bus-stats")),
        input_options=source,
        window=str(window.get("duration", "5 minutes")),
        watermark=str(window.get("watermark", "10 minutes")),
        topic_options=topic,
        parquet_path=str(parquet) if parquet else None,
        checkpoint=str(doc["checkpoint"]),
        trigger=trigger or {"processingTime": "10 seconds"},
    )


def _haversine_km(a: str, b: str) -> str:
    """SQL for the great-circle distance between two structs with lat/lon fields."""
    return (
        f"2 * {EARTH_RADIUS_KM} * asin(sqrt("
        f"pow(sin(radians({b}.lat - {a}.lat) / 2), 2) + "
        f"cos(radians({a}.lat)) * cos(radians({b}.lat)) * pow(sin(radians({b}.lon - {a}.lon) / 2), 2)))"
    )


def parse_locations(raw: Any) -> Any:
    """Records -> (trip, timestamp, offset, lat, lon); values that are not "lat, lon" are dropped
    (try_cast: Spark 4 runs in ANSI mode, where a plain cast of a bad value fails the query)."""
    from pyspark.sql import functions as F

    parts = F.split(F.col("value").cast("string"), ",")
    return (
        raw.select(
            F.col("key").cast("string").alias("trip"),
            "timestamp",
            "partition",
            "offset",
            F.trim(parts.getItem(0)).try_cast("double").alias("lat"),
            F.trim(parts.getItem(1)).try_cast("double").alias("lon"),
        )
        .where("trip IS NOT NULL AND lat IS NOT NULL AND lon IS NOT NULL")
        .where("lat BETWEEN -90 AND 90 AND lon BETWEEN -180 AND 180")
    )


def trip_stats(locations: Any, window: str, watermark: str) -> Any:
    """Per trip and tumbling window: latest position, update count and distance along the reported points."""
    from pyspark.sql import functions as F

    # A trip's updates share a key and so a partition; (timestamp, offset) orders them as the bus sent them.
    points = F.array_sort(F.collect_list(F.struct("timestamp", "offset", "lat", "lon")))
    grouped = (
        locations.withWatermark("timestamp", watermark)
        .groupBy(F.window("timestamp", window).alias("window"), "trip")
        .agg(points.alias("points"), F.count("*").alias("updates"))
    )
    legs = "zip_with(slice(points, 1, size(points) - 1), slice(points, 2, size(points) - 1), (a, b) -> {hav})"
    distance = f"aggregate({legs.format(hav=_haversine_km('a', 'b'))}, 0D, (acc, d) -> acc + d)"
    return grouped.select(
        "trip",
        F.col("window.start").alias("window_start"),
        F.col("window.end").alias("window_end"),
        F.element_at("points", -1).getField("lat").alias("lat"),
        F.element_at("points", -1).getField("lon").alias("lon"),
        F.element_at("points", -1).getField("timestamp").alias("last_seen"),
        "updates",
        F.round(F.expr(distance), 3).alias("distance_km"),
    )


def latest_stats(spark: Any, parquet_path: str) -> Any:
    """The Parquet output with only the newest row per (trip, window) - what a dashboard wants."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    rows = spark.read.parquet(parquet_path)
    newest = Window.partitionBy("trip", "window_start").orderBy(F.col("batch_id").desc())
    return rows.withColumn("_n", F.row_number().over(newest)).where("_n = 1").drop("_n")


def write_outputs(spec: JobSpec) -> Any:
    """foreachBatch function: the same updated rows to the stats topic and to Parquet."""
    from pyspark.sql import functions as F

    def write(batch: Any, batch_id: int) -> None:
        batch = batch.persist()  # written twice below; computing the stateful aggregation once is enough
        try:
            if batch.isEmpty():
                return
            if spec.parquet_path:
                # One directory per batch, overwritten as a whole: a replayed batch leaves no duplicates.
                batch.write.mode("overwrite").parquet(f"{spec.parquet_path}/batch_id={batch_id}")
            if spec.topic_options:
                record = batch.select(
                    F.col("trip").alias("key"),
                    F.to_json(F.struct(*[c for c in batch.columns])).alias("value"),
                )
                record.write.format("kbus").options(**spec.topic_options).mode("append").save()
        finally:
            batch.unpersist()

    return write


def run(spec: JobSpec) -> None:
    from pyspark.sql import SparkSession

    import kbus.spark

    spark = SparkSession.builder.appName(spec.name).getOrCreate()
    kbus.spark.register(spark)  # harmless if `kbus spark-submit` already auto-registered it
    raw = spark.readStream.format("kbus").options(**spec.input_options).load()
    stats = trip_stats(parse_locations(raw), spec.window, spec.watermark)
    query = (
        stats.writeStream.queryName(spec.name)
        .outputMode("update")
        .foreachBatch(write_outputs(spec))
        .option("checkpointLocation", spec.checkpoint)
        .trigger(**spec.trigger)
        .start()
    )
    query.awaitTermination()
    done = [p for p in query.recentProgress if p.numInputRows > 0]
    print(
        f"{spec.name}: {sum(p.numInputRows for p in done)} location updates in {len(done)} micro-batches",
        flush=True,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=str(DEFAULT_CONFIG), help="the YAML job description")
    parser.add_argument("--bootstrap-server", help="override kafka.bootstrap.servers of input and output")
    parser.add_argument("--available-now", action="store_true", help="process what is there now, then stop")
    args = parser.parse_args(argv)
    try:
        spec = load_job(args.config, args.bootstrap_server, args.available_now)
    except JobConfigError as e:
        print(f"bus_locations: {e}", file=sys.stderr)
        return 2
    run(spec)
    return 0


if __name__ == "__main__":
    sys.exit(main())
