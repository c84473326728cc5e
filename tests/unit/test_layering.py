"""kbus/server's layers, as docs/architecture.md lists them top to bottom: no module imports from a layer above its
own. The order is read from the document's table, so the document and the code cannot drift apart; every import
counts, those under `if TYPE_CHECKING:` and inside functions included (a type is a dependency too)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SERVER = ROOT / "kbus" / "server"
ARCHITECTURE = ROOT / "docs" / "architecture.md"


def layers() -> dict[str, int]:
    """Each top-level unit of kbus/server (a package, or a module at the root) -> its layer, 0 at the bottom."""
    lines = ARCHITECTURE.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| layer (kbus/server/)"))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        first_cell = line.split("|")[1]
        rows.append([name.removesuffix("/").removesuffix(".py") for name in re.findall(r"`([^`]+)`", first_cell)])
    return {unit: len(rows) - 1 - i for i, row in enumerate(rows) for unit in row}


def unit_of(module: str) -> str | None:
    """`kbus.server.log.log` -> `log`; None outside kbus.server (or for kbus.server itself)."""
    parts = module.split(".")
    return parts[2] if parts[:2] == ["kbus", "server"] and len(parts) > 2 else None


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every import in the file; `from kbus.server import x` counts as kbus.server.x."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "kbus.server":
                found += [(node.lineno, f"kbus.server.{alias.name}") for alias in node.names]
            else:
                found.append((node.lineno, node.module))
    return found


def upward_imports(layer: dict[str, int]) -> list[str]:
    found = []
    for path in sorted(SERVER.rglob("*.py")):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        own = unit_of(module)
        if own is None:
            continue
        for lineno, target in imported_modules(path):
            other = unit_of(target)
            if other is not None and other != own and layer[other] > layer[own]:
                found.append(f"{path.relative_to(ROOT)}:{lineno} ({own}) imports {target} ({other}, a layer above)")
    return found


def test_every_unit_of_kbus_server_has_a_layer_in_the_architecture_document() -> None:
    units = {p.stem for p in SERVER.glob("*.py")} | {p.parent.name for p in SERVER.glob("*/__init__.py")}
    assert units - {"__init__"} == set(layers())


def test_no_module_of_kbus_server_imports_from_a_layer_above_its_own() -> None:
    assert upward_imports(layers()) == []


# docs/architecture.md, "Where each Kafka rule lives": which kbus packages each package may import
PACKAGE_IMPORTS = {
    "common": set(),
    "protocol": {"common"},
    "zk": {"common"},
    "spark": {"common"},
    "admin": {"common", "protocol", "zk"},
    "server": {"common", "protocol", "zk", "ops"},  # ops: the metrics endpoint and logging config (main.py)
}


def test_kbus_packages_import_only_the_packages_the_architecture_document_allows() -> None:
    found = []
    for package, allowed in PACKAGE_IMPORTS.items():
        for path in sorted((ROOT / "kbus" / package).rglob("*.py")):
            for lineno, target in imported_modules(path):
                parts = target.split(".")
                if parts[0] == "kbus" and len(parts) > 1 and parts[1] != package and parts[1] not in allowed:
                    found.append(f"{path.relative_to(ROOT)}:{lineno} imports {target}")
    assert found == []
