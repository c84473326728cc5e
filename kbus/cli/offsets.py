"""`kbus get-offsets` (kafka-get-offsets.sh) and `kbus delete-records` (kafka-delete-records.sh)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Annotated

import typer

from kbus.admin.errors import AdminError
from kbus.admin.kafka import EARLIEST, LATEST, MAX_TIMESTAMP, KafkaAdmin
from kbus.cli.app import app
from kbus.cli.client_config import translate
from kbus.cli.common import KafkaStyleCommand, UsageError, check_reachable, fail, load_properties
from kbus.cli.topic_names import match_topics
from kbus.common.topics import INTERNAL_TOPICS

_TIMES = {"-1": LATEST, "latest": LATEST, "-2": EARLIEST, "earliest": EARLIEST, "-3": MAX_TIMESTAMP,
          "max-timestamp": MAX_TIMESTAMP}


def parse_time(text: str) -> int:
    """--time: -1/latest, -2/earliest, -3/max-timestamp or a timestamp in ms."""
    spec = _TIMES.get(text.strip().lower())
    if spec is not None:
        return spec
    try:
        value = int(text)
    except ValueError:
        value = -4
    if value < 0:
        raise UsageError(
            f"Malformed time argument {text}. Please use -1 or latest / -2 or earliest / -3 or max-timestamp, "
            "or a specified long format timestamp"
        )
    return value


PartitionFilter = tuple[int, int | None]  # inclusive lower bound, exclusive upper bound (None = open)


def parse_partitions(text: str) -> list[PartitionFilter]:
    """GetOffsetShell's partition list: `0,2,5-7,9-` (ranges inclusive, `N-` open ended, `-N` below N)."""
    out: list[PartitionFilter] = []
    for part in text.split(","):
        part = part.strip()
        m = re.fullmatch(r"(\d*)(-?)(\d*)", part)
        if not part or m is None or (not m.group(1) and not m.group(3)):
            raise UsageError(f"Invalid partition '{part}' specified in partition list '{text}'")
        lo, dash, hi = m.groups()
        if not dash:
            out.append((int(lo), int(lo) + 1))
        else:
            out.append((int(lo) if lo else 0, int(hi) + 1 if hi else None))
    return out


def parse_topic_partitions(text: str) -> list[tuple[str, list[PartitionFilter] | None]]:
    """`t1:1,t2:0-3,t3,t4:5-,t5:-3` -> (topic regex, partition filters or None for all)."""
    out: list[tuple[str, list[PartitionFilter] | None]] = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        topic, sep, parts = item.partition(":")
        out.append((topic, parse_partitions(parts) if sep and parts else None))
    return out


def _partition_allowed(p: int, filters: list[PartitionFilter] | None) -> bool:
    return filters is None or any(lo <= p and (hi is None or p < hi) for lo, hi in filters)


def _admin(bootstrap: str | None, command_config: str | None) -> KafkaAdmin:
    if not bootstrap:
        raise UsageError('Missing required argument "[bootstrap-server]"')
    check_reachable(bootstrap)
    conf = translate(load_properties(command_config)) if command_config else {}
    return KafkaAdmin(bootstrap, conf)


@app.command("get-offsets", cls=KafkaStyleCommand)
def get_offsets(
    bootstrap_server: Annotated[
        str | None, typer.Option("--bootstrap-server", "--broker-list", help="The broker(s), host:port,...")
    ] = None,
    topic: Annotated[str | None, typer.Option("--topic", help="Topic name or regular expression")] = None,
    partitions: Annotated[
        str | None, typer.Option("--partitions", help="Partition ids or ranges: 0,2,5-7,9-")
    ] = None,
    topic_partitions: Annotated[
        str | None, typer.Option("--topic-partitions", help="t1:1,t2:0-3,t3,t4:5-,t5:-3")
    ] = None,
    time: Annotated[
        str, typer.Option("--time", help="-1/latest, -2/earliest, -3/max-timestamp or a timestamp (ms)")
    ] = "latest",
    exclude_internal_topics: Annotated[
        bool, typer.Option("--exclude-internal-topics", help="Leave internal topics out")
    ] = False,
    command_config: Annotated[
        str | None, typer.Option("--command-config", help="Admin client .properties file")
    ] = None,
) -> None:
    """Print `topic:partition:offset` for each selected partition (kafka-get-offsets.sh)."""
    try:
        spec = parse_time(time)
        if topic_partitions and (topic or partitions):
            raise UsageError("--topic-partitions cannot be used with --topic or --partitions")
        if topic_partitions:
            selectors = parse_topic_partitions(topic_partitions)
        else:
            selectors = [(topic or ".*", parse_partitions(partitions) if partitions else None)]
        admin = _admin(bootstrap_server, command_config)
    except UsageError as exc:
        fail(str(exc))
    except (ConnectionError, AdminError) as exc:
        fail(f"Error occurred: {exc}")
    try:
        names = admin.list_topics()
        wanted: set[tuple[str, int]] = set()
        for pattern, filters in selectors:
            for name in match_topics(pattern, names):
                if exclude_internal_topics and name in INTERNAL_TOPICS:
                    continue
                wanted.update((name, p) for p in admin.partitions_of(name) if _partition_allowed(p, filters))
        if not wanted:
            fail("Could not match any topic-partitions with the specified filters")
        for o in admin.list_offsets(sorted(wanted), spec):
            shown = "" if o.offset < 0 else str(o.offset)
            print(f"{o.topic}:{o.partition}:{shown}")
    except AdminError as exc:
        fail(f"Error occurred: {exc}")
    finally:
        admin.close()


def parse_offset_json(text: str) -> list[tuple[str, int, int]]:
    """kafka-delete-records' file: {"partitions":[{"topic":"foo","partition":1,"offset":1}],"version":1}."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"The offset json file is not valid JSON: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("partitions"), list):
        raise UsageError('The offset json file must contain a "partitions" list')
    version = doc.get("version", 1)
    if version != 1:
        raise UsageError(f"Not supported version field value {version}")
    out: list[tuple[str, int, int]] = []
    for entry in doc["partitions"]:
        try:
            t, p, o = entry["topic"], entry["partition"], entry["offset"]
        except (KeyError, TypeError):
            raise UsageError(f"Each partition entry needs topic, partition and offset: {entry!r}") from None
        if not isinstance(t, str) or not isinstance(p, int) or not isinstance(o, int):
            raise UsageError(f"Invalid partition entry: {entry!r}")
        out.append((t, p, o))
    seen: set[tuple[str, int]] = set()
    dups = []
    for t, p, _ in out:
        if (t, p) in seen:
            dups.append(f"{t}-{p}")
        seen.add((t, p))
    if dups:
        raise UsageError(f"Offset json file contains duplicate topic partitions: {','.join(dups)}")
    return out


@app.command("delete-records", cls=KafkaStyleCommand)
def delete_records(
    bootstrap_server: Annotated[
        str | None, typer.Option("--bootstrap-server", help="The broker(s), host:port,...")
    ] = None,
    offset_json_file: Annotated[
        str | None, typer.Option("--offset-json-file", help='{"partitions":[{"topic":..,"partition":..,"offset":..}]}')
    ] = None,
    command_config: Annotated[
        str | None, typer.Option("--command-config", help="Admin client .properties file")
    ] = None,
) -> None:
    """Delete records below the given offsets (kafka-delete-records.sh)."""
    try:
        if not offset_json_file:
            raise UsageError('Missing required argument "[offset-json-file]"')
        try:
            text = Path(offset_json_file).read_text(encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"Cannot read {offset_json_file}: {exc.strerror or exc}") from None
        request = parse_offset_json(text)
        admin = _admin(bootstrap_server, command_config)
    except UsageError as exc:
        fail(str(exc))
    except (ConnectionError, AdminError) as exc:
        fail(f"Error occurred: {exc}")
    try:
        print("Executing records delete operation")
        results = admin.delete_records(request)
        print("Records delete operation completed:")
        for r in results:
            if r.error is None:
                print(f"partition: {r.topic}-{r.partition}\tlow_watermark: {r.low_watermark}")
            else:
                print(f"partition: {r.topic}-{r.partition}\terror: {r.error}")
    except AdminError as exc:
        fail(f"Error occurred: {exc}")
    finally:
        admin.close()
    if any(r.error is not None for r in results):
        raise typer.Exit(1)
