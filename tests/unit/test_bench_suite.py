"""bench/run, the benchmark suite's entry point: every scenario names a script that exists, every script in
bench/scenarios/ is reachable from a scenario, and each shell script parses. (Running the benchmarks is bench/'s
business, not the test suite's.)"""

import importlib.util
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "bench"


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


def test_every_scenario_script_is_reachable_from_bench_run() -> None:
    named = {Path(p).name for s in suite().SCENARIOS for p in s.argv} | {"scale.sh", "small_requests.sh"}  # shapes
    scripts = {p.name for p in (BENCH / "scenarios").glob("*.sh")}
    assert scripts - named == set()


def test_bench_run_lists_the_scenarios() -> None:
    res = subprocess.run([str(BENCH / "run"), "--list"], capture_output=True, text=True, timeout=60, check=False)
    assert res.returncode == 0, res.stderr
    for name in ("throughput", "latency", "cluster", "scale", "small-requests", "shapes", "ops", "security",
                 "transactions", "replication", "fuzz", "report"):
        assert f"  {name} " in res.stdout
    bad = subprocess.run([str(BENCH / "run"), "no-such"], capture_output=True, text=True, timeout=60, check=False)
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
