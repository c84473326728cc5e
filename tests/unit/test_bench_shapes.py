"""bench/lib/shapes.py: issue 23's shape table (one row per shape, medians, Kafka's warmest round, the ratios,
the misses) and the README block it is pasted from."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_shapes", ROOT / "bench/lib/shapes.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_shapes"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


shapes = _load()


def _scale(label: str, axis: str, x: int, load: float = 2.0, **values: float) -> dict[str, object]:
    return {"tool": "scale", "label": label, "axis": axis, "x": x, "time": "2026-11-26T16:00:00",
            "loadavg_start": load, **values}


def _small(label: str, api: str, cpu: float, rate: float, load: float = 3.0) -> dict[str, object]:
    return {"tool": "small-requests", "label": label, "api": api, "broker_cpu_us_per_request": cpu,
            "requests_per_s": rate, "loadavg": load, "time": "2026-11-26T16:10:00"}


def test_rows_come_in_the_issue_order_one_per_shape_and_measure() -> None:
    scale = [_scale(lbl, "msgsize", 100_000, produce_cpu_us_per_msg=1, produce_msg_s=1, consume_cpu_us_per_msg=1,
                    consume_msg_s=1) for lbl in ("kafka", "kbus")]
    scale += [_scale(lbl, "connections", 10, produce_cpu_us_per_request=1, produce_req_s=1)
              for lbl in ("kafka", "kbus")]
    scale += [_scale(lbl, "partitions", 10, fetch_cpu_us_per_request=1, metadata_cpu_us_per_request=1)
              for lbl in ("kafka", "kbus")]
    scale += [_scale(lbl, "partitions", 1, create_s=1) for lbl in ("kafka", "kbus")]  # the create phase's row
    small = [_small(lbl, api, 1, 1) for api in ("heartbeat", "produce") for lbl in ("kafka", "kbus")]
    rows = shapes.build(scale, small)
    assert [(r.shape, r.what) for r in rows] == [
        ("partitions 1", "create the topic (wall time)"),
        ("partitions 10", "full Fetch of every partition, nothing new"),
        ("partitions 10", "Metadata of the topic"),
        ("connections 10", "one Produce (10 x 100 B) per connection"),
        ("message size B 100,000", "produce"),
        ("message size B 100,000", "consume"),
        ("one-record produce", "16 connections, 4 in flight each"),
        ("one-record heartbeat", "16 connections, 4 in flight each"),
    ]


def test_medians_warmest_kafka_round_and_the_ratios() -> None:
    small = [_small("kafka", "produce", cpu, rate) for cpu, rate in ((50, 30_000), (40, 35_000), (30, 40_000))]
    small += [_small("kbus", "produce", cpu, rate) for cpu, rate in ((36, 27_000), (37, 29_000), (99, 10_000))]
    small += [_small("kbus-base", "produce", cpu, 1) for cpu in (45, 46, 47)]
    (row,) = shapes.build([], small)
    assert row.med("kbus") == 37 and row.med("kafka") == 40 and row.warmest() == 30
    assert row.warmest(rate=True) == 40_000  # Kafka's best rate, not its median
    r = row.ratios()
    assert r["cost"] == pytest.approx(37 / 40)
    assert r["cost_warm"] == pytest.approx(37 / 30)
    assert r["cost_base"] == pytest.approx(37 / 46)
    assert r["rate"] == pytest.approx(27_000 / 35_000)
    # below Kafka's median cost but above its warmest round, and slower: both are misses
    assert row.over() == ["cost (warmest)", "rate"]


def test_a_cell_at_or_under_kafka_is_not_marked() -> None:
    scale = [_scale("kafka", "connections", 5000, produce_cpu_us_per_request=60, produce_req_s=2000),
             _scale("kbus", "connections", 5000, produce_cpu_us_per_request=60, produce_req_s=2000)]
    (row,) = shapes.build(scale, [])
    assert row.over() == []
    scale[1]["produce_cpu_us_per_request"] = 61
    (row,) = shapes.build(scale, [])
    assert row.over() == ["cost"]


def test_markdown_marks_misses_and_says_the_load() -> None:
    scale = [_scale("kafka", "msgsize", 10, load=1.5, produce_cpu_us_per_msg=0.2, produce_msg_s=400_000),
             _scale("kbus", "msgsize", 10, load=4.5, produce_cpu_us_per_msg=0.3, produce_msg_s=500_000)]
    text = shapes.markdown(shapes.build(scale, []))
    line = text.splitlines()[2]
    assert line.startswith("| message size B 10 | produce (µs/msg) | 0.3 (500,000/s) | 0.2 (400,000/s) |")
    assert "| 1.50x |" in line and "| 1.25x |" in line and "**cost**" in line and "| 1.5-4.5 |" in line


def test_readme_block_from_a_results_folder_and_splice(tmp_path: Path) -> None:
    results = tmp_path / "bench/results/2026-11-26-x"
    results.mkdir(parents=True)
    (results / "small_requests.jsonl").write_text("\n".join(json.dumps(r) for r in (
        _small("kafka", "metadata", 24, 40_000), _small("kbus", "metadata", 26, 38_000))) + "\n")
    (results / "scale_msgsize.png").write_bytes(b"")
    (results / "shapes.json").write_text(json.dumps({
        "since": "2026-11-26T16:00:00", "command": "bench/run shapes 3", "small": "small_requests.jsonl"}))
    block = shapes.readme_block(results, repo=tmp_path)
    assert block.startswith(shapes.BEGIN) and block.endswith(shapes.END)
    assert "`bench/run shapes 3`" in block
    assert "[msgsize](bench/results/2026-11-26-x/scale_msgsize.png)" in block
    assert "| one-record metadata |" in block and "1.08x" in block
    readme = f"# kbus\n\n## Benchmarks\n\n{shapes.BEGIN}\nold table\n{shapes.END}\n\nmore\n"
    out = shapes.splice(readme, block)
    assert "old table" not in out and out.endswith("\n\nmore\n") and out.count(shapes.BEGIN) == 1
    with pytest.raises(SystemExit):
        shapes.splice("# no markers\n", block)
    (results / "shapes.json").unlink()
    with pytest.raises(SystemExit, match=r"no shapes\.json"):
        shapes.readme_block(results, repo=tmp_path)


def test_rows_before_since_are_left_out(tmp_path: Path) -> None:
    path = tmp_path / "small_requests.jsonl"
    old = {**_small("kbus", "produce", 99, 1), "time": "2026-11-25T10:00:00"}
    path.write_text(json.dumps(old) + "\n" + json.dumps(_small("kbus", "produce", 36, 1)) + "\n")
    assert [r["broker_cpu_us_per_request"] for r in shapes.read_jsonl(path, "2026-11-26T00:00:00")] == [36]


def test_the_readme_carries_the_markers_bench_run_readme_fills() -> None:
    readme = (ROOT / "README.md").read_text()
    out = shapes.splice(readme, f"{shapes.BEGIN}\nnew\n{shapes.END}")
    assert f"{shapes.BEGIN}\nnew\n{shapes.END}" in out and "## Benchmarks" in out


def test_consume_cells_say_the_records_per_batch_they_read_and_the_same_log_row_follows() -> None:
    scale = [_scale("kafka", "partitions", 1, consume_cpu_us_per_msg=0.12, consume_msg_s=1_500_000,
                    consume_records_per_batch=4000, same_log_consume_cpu_us_per_msg=0.2, same_log_consume_msg_s=900_000,
                    same_log_records_per_batch=100),
             _scale("kbus", "partitions", 1, consume_cpu_us_per_msg=0.07, consume_msg_s=1_300_000,
                    consume_records_per_batch=1200.5, same_log_consume_cpu_us_per_msg=0.1,
                    same_log_consume_msg_s=950_000, same_log_records_per_batch=100)]
    rows = shapes.build(scale, [])
    assert [r.what for r in rows] == ["consume them", shapes.SAME_LOG]
    own, same = rows
    assert own.records_per_batch("kafka") == 4000 and own.records_per_batch("kbus") == 1200.5
    assert own.over() == ["rate"] and same.over() == []
    lines = shapes.markdown(rows).splitlines()
    assert "| 0.07 (1,300,000/s, 1,200 rec/batch) | 0.12 (1,500,000/s, 4,000 rec/batch) |" in lines[2]
    assert lines[3].startswith(f"| partitions 1 | {shapes.SAME_LOG} (µs/msg) | 0.1 (950,000/s, 100 rec/batch) |")
    # a line without the records per batch (an older run) still makes its cell
    del scale[0]["consume_records_per_batch"]
    assert "| 0.12 (1,500,000/s) |" in shapes.markdown(shapes.build(scale, []))


def test_a_point_a_system_failed_is_marked_not_blank() -> None:
    """kbus-base out of descriptors at 10,000 partitions, kbus failing one round of a load: scale.py writes the
    point's line with "failed" (and what it measured before); the cells say so, the table is built as before."""
    load = dict(produce_cpu_us_per_msg=2.0, produce_msg_s=200_000, consume_cpu_us_per_msg=0.2, consume_msg_s=8e5,
                fetch_cpu_us_per_request=20_000, metadata_cpu_us_per_request=600)
    scale = [_scale("kafka", "partitions", 10_000, phase="load", **load) for _ in range(2)]
    scale += [_scale("kafka", "partitions", 10_000, phase="create", create_s=49),
              _scale("kbus", "partitions", 10_000, phase="create", create_s=24),
              _scale("kbus-base", "partitions", 10_000, phase="create", create_s=24)]
    scale += [_scale("kbus", "partitions", 10_000, phase="load", **load),
              _scale("kbus", "partitions", 10_000, phase="load", metadata_cpu_us_per_request=500,
                     failed="RuntimeError: produce: 3 not delivered")]
    scale += [_scale("kbus-base", "partitions", 10_000, phase="load", failed="TimeoutError: scale-p10000")] * 2
    rows = {r.what: r for r in shapes.build(scale, [])}
    produce, metadata, create = (rows["produce 100 B spread over every partition"], rows["Metadata of the topic"],
                                 rows["create the topic (wall time)"])
    assert produce.failed == {"kbus": ["RuntimeError: produce: 3 not delivered"],
                              "kbus-base": ["TimeoutError: scale-p10000"] * 2}
    assert metadata.med("kbus") == 550 and "kbus" not in metadata.failed  # measured before the failure
    assert create.failed == {}  # the load's failure is not the creation's
    assert produce.over() == ["kbus failed"] and metadata.over() == []
    text = shapes.markdown(list(rows.values()))
    line = next(ln for ln in text.splitlines() if "| produce 100 B" in ln)
    assert "| 2 (200,000/s) **+1 failed** |" in line and "| **failed** |" in line and "**kbus failed**" in line
    assert "kbus-base failed 5 rows" in shapes.summary(list(rows.values()))


def test_the_measured_floor_gets_a_column_only_in_a_run_that_had_it() -> None:
    scale = [_scale(lbl, "connections", 5000, produce_cpu_us_per_request=cpu, produce_req_s=1000)
             for lbl, cpu in (("kafka", 70), ("kbus", 80), ("floor-log", 17))]
    scale.append(_scale("kbus", "msgsize", 10, produce_cpu_us_per_msg=0.3, produce_msg_s=1))
    lines = shapes.markdown(shapes.build(scale, [])).splitlines()
    assert "| floor-log (no broker) |" in lines[0]
    assert all(line.count("|") == lines[0].count("|") for line in lines)  # every row has the column
    assert "| 17 (1,000/s) |" in lines[2]  # the connections row carries the floor's cost
    without = shapes.markdown(shapes.build(scale[:2], [])).splitlines()
    assert "floor" not in without[0] and without[0].count("|") == lines[0].count("|") - 1
