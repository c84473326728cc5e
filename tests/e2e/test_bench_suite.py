"""bench/run, the benchmark suite's entry point (bench/lib/suite.py, run here with this interpreter): every scenario
names a script that exists, every script in bench/scenarios/ is reachable from a scenario, each shell script
parses, and the report links its raw data. (Running the benchmarks is bench/'s business, not the test suite's.)"""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "bench"
SUITE = [sys.executable, str(BENCH / "lib" / "suite.py")]  # what bench/run execs


def suite():  # bench/lib/suite.py, loaded by path (bench/ is not a package)
    sys.path.insert(0, str(BENCH / "lib"))
    spec = importlib.util.spec_from_file_location("bench_suite", BENCH / "lib" / "suite.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_suite"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_every_scenario_runs_a_script_that_exists() -> None:
    for s in suite().SCENARIOS:
        for part in s.argv:
            if part.startswith("bench/"):
                assert (REPO / part).is_file(), (s.name, part)


def test_scenario_names_are_unique() -> None:
    # bench/run looks a scenario up by name: a second one of the same name would hide the first
    names = [s.name for s in suite().SCENARIOS]
    assert sorted(n for n in set(names) if names.count(n) > 1) == []


def test_every_scenario_script_is_reachable_from_bench_run() -> None:
    named = {Path(p).name for s in suite().SCENARIOS for p in s.argv} | {"scale.sh", "small_requests.sh"}  # shapes
    scripts = {p.name for p in (BENCH / "scenarios").glob("*.sh")}
    assert scripts - named == set()


def test_bench_run_lists_the_scenarios() -> None:
    res = subprocess.run([*SUITE, "--list"], capture_output=True, text=True, timeout=60, check=False)
    assert res.returncode == 0, res.stderr
    for name in ("throughput", "latency", "cluster", "scale", "small-requests", "shapes", "ops", "security",
                 "transactions", "replication", "fuzz", "report"):
        assert f"  {name} " in res.stdout
    bad = subprocess.run([*SUITE, "no-such"], capture_output=True, text=True, timeout=60, check=False)
    assert bad.returncode == 2 and "bench/run --list" in bad.stderr


def test_shell_scripts_parse() -> None:
    for script in [*(BENCH / "scenarios").glob("*.sh"), *(BENCH / "lib").glob("*.sh"), BENCH / "run"]:
        res = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True, check=False)
        assert res.returncode == 0, (script, res.stderr)


def test_bench_top_level_is_a_handful() -> None:
    assert sorted(p.name for p in BENCH.iterdir()) == [
        "README.md", "REPORT.md", "lib", "notes", "results", "run", "scenarios",
    ]
    assert len((BENCH / "README.md").read_text().splitlines()) <= 40


def test_report_links_every_raw_file_and_names_its_command(tmp_path: Path) -> None:
    """bench/run report --out FILE DIR: per raw file a link to it, the command from commands.jsonl (or, for a file
    no run recorded, the scenario that writes it) and its table."""
    day = tmp_path / "results" / "2026-01-01-host"
    day.mkdir(parents=True)
    rows = [{"tool": "small-requests", "label": label, "api": "produce", "broker_cpu_us_per_request": us,
             "time": "2026-01-01T00:00:00"} for label, us in (("kafka", 30.0), ("kbus", 45.0), ("kbus-base", 50.0))]
    (day / "small_requests.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (day / "ops.jsonl").write_text("")
    (day / "commands.jsonl").write_text(json.dumps(
        {"time": "2026-01-01T00:00:00Z", "command": "KBUS_BASE=../b bench/run small-requests 3", "exit": 0,
         "outputs": ["small_requests.jsonl"]}) + "\n")
    out = tmp_path / "REPORT.md"
    res = subprocess.run([*SUITE, "report", "--out", str(out), str(day)], capture_output=True, text=True,
                         timeout=120, check=False)
    assert res.returncode == 0, res.stderr
    text = out.read_text()
    assert "[results/2026-01-01-host/small_requests.jsonl](results/2026-01-01-host/small_requests.jsonl)" in text
    assert "Command: `KBUS_BASE=../b bench/run small-requests 3`" in text
    assert "| produce | 30.0 | 45.0 (1.50x) [0.90x kbus-base] | 50.0 (1.67x) |" in text
    assert "Command: `bench/run ops` (no command recorded" in text
