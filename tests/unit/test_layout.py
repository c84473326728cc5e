"""The repository's shape holds: tests live in unit/integration/e2e by what they start, and kbus's packages import
one way (kbus.common at the bottom, nothing below the broker imports it, nothing imports the CLI)."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TESTS = REPO / "tests"
KBUS = REPO / "kbus"

# package -> the kbus packages it may import (docs/architecture.md, "Where each Kafka rule lives")
ALLOWED = {
    "common": set(),
    "protocol": {"common"},
    "zk": {"common"},
    "spark": {"common"},
    "admin": {"common", "protocol", "zk"},
    "server": {"common", "protocol", "zk", "ops"},
    "ops": {"common", "server"},
    "connect": {"common", "ops"},
    "ui": {"common", "protocol", "admin"},
    "cli": {"common", "protocol", "zk", "admin", "server", "ops", "spark", "connect", "ui"},
}
# what a unit test may not use: it starts no process
PROCESS_MARKERS = ("subprocess", "BrokerProcess", "ZooKeeperServer", "multiprocessing", "os.fork")


def test_test_files_live_in_unit_integration_or_e2e() -> None:
    misplaced = [
        str(p.relative_to(TESTS))
        for p in TESTS.rglob("test_*.py")
        if p.relative_to(TESTS).parts[0] not in ("unit", "integration", "e2e")
    ]
    assert misplaced == [], f"test files outside tests/unit, tests/integration, tests/e2e: {misplaced}"


def test_unit_tests_start_no_processes() -> None:
    offenders = {}
    for p in sorted((TESTS / "unit").rglob("*.py")):
        if p.name == Path(__file__).name:
            continue
        text = p.read_text()
        used = [m for m in PROCESS_MARKERS if m in text]
        if used:
            offenders[p.name] = used
    assert offenders == {}, f"unit tests that start processes belong in tests/integration or tests/e2e: {offenders}"


def _kbus_imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        for name in names:
            parts = name.split(".")
            if len(parts) > 1 and parts[0] == "kbus":
                found.add(parts[1])
    return found


def test_packages_import_one_way() -> None:
    wrong = []
    for package, allowed in ALLOWED.items():
        for p in sorted((KBUS / package).rglob("*.py")):
            for target in _kbus_imports(p) - allowed - {package}:
                wrong.append(f"{p.relative_to(REPO)} imports kbus.{target}")
    assert wrong == []
