"""`kbus install-service` / `uninstall-service`: put kbus on a host as two systemd services.

A plan is built first (a list of Actions, each with the shell-like line `--dry-run` prints), then run. Paths are
the ones the units name (/etc/kbus, /var/lib/kbus, /var/log/kbus); `root` stages the whole tree under another
directory instead (a package build or a look before installing), and then the user and systemctl are left alone.
"""

from __future__ import annotations

import os
import pwd
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

USER = "kbus"
CONFIG_DIR = Path("/etc/kbus")
STATE_DIR = Path("/var/lib/kbus")
DATA_DIR = STATE_DIR / "data"
ZK_DATA_DIR = STATE_DIR / "zookeeper"
LOG_DIR = Path("/var/log/kbus")
UNIT_DIR = Path("/etc/systemd/system")
UNITS = ("kbus-zookeeper.service", "kbus.service")
# the kbus path the shipped units name; replaced with the installed entry point
SHIPPED_KBUS = "/opt/kbus/venv/bin/kbus"
METRICS_PORT = 9404
SOURCE_ROOT = Path(__file__).resolve().parents[2]
# where a wheel / `pip install DIR` puts config/ and systemd/ (pyproject's data-files): there is no source tree then
INSTALLED_SHARE = Path(sys.prefix) / "share" / "kbus"


def default_source() -> Path:
    """The checkout kbus runs from (editable install), else the copies installed beside it under share/kbus."""
    if (SOURCE_ROOT / "systemd" / UNITS[1]).is_file():
        return SOURCE_ROOT
    return INSTALLED_SHARE


class InstallError(Exception):
    """Something missing or not allowed; the message is one line saying what."""


@dataclass
class Action:
    describe: str
    run: Callable[[], None]


def set_property(text: str, key: str, value: str, comment: str = "") -> str:
    """Set `key` in .properties text: rewrite its (possibly commented-out) line in place, or append it."""
    pattern = re.compile(rf"^[#!]?\s*{re.escape(key)}\s*[=:].*$", re.MULTILINE)
    lines = [m for m in pattern.finditer(text)]
    live = [m for m in lines if not m.group(0).startswith(("#", "!"))]
    candidates = live or lines
    target = candidates[0] if candidates else None
    if target is not None:
        return text[: target.start()] + f"{key}={value}" + text[target.end() :]
    tail = "" if text.endswith("\n") or not text else "\n"
    note = f"\n# {comment}\n" if comment else ""
    return f"{text}{tail}{note}{key}={value}\n"


def server_properties(template: str) -> str:
    text = set_property(template, "log.dirs", str(DATA_DIR))
    text = set_property(text, "zookeeper.connect", "localhost:2181")
    text = set_property(
        text, "metrics.port", str(METRICS_PORT), "Prometheus metrics and health: http://127.0.0.1:9404/metrics, /health"
    )
    return set_property(text, "metrics.host", "127.0.0.1")


def zookeeper_properties(template: str) -> str:
    return set_property(template, "dataDir", str(ZK_DATA_DIR))


def unit_text(template: str, kbus_bin: Path) -> str:
    return template.replace(SHIPPED_KBUS, str(kbus_bin))


# What the units' sandboxing hides from the service: (setting, directories it hides or empties)
HIDING_SETTINGS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("ProtectHome=yes", ("/home", "/root", "/run/user")),
    ("PrivateTmp=yes", ("/tmp", "/var/tmp")),
)


def _interpreter(script: Path) -> Path | None:
    """The interpreter a `#!` script names (a venv's bin/kbus names the venv's python)."""
    try:
        with script.open("rb") as f:
            first = f.readline(4096)
    except OSError:
        return None
    if not first.startswith(b"#!"):
        return None
    words = first[2:].decode("utf-8", "replace").split()
    return Path(words[0]) if words else None


def service_paths(kbus_bin: Path, package_dir: Path | None = None) -> list[Path]:
    """Every path the service must reach to run `kbus_bin`: the script, its interpreter (and where the symlinks of a
    venv's python lead: the base Python and its stdlib), and the kbus package it imports, if known."""
    paths = [kbus_bin, kbus_bin.resolve()]
    interp = _interpreter(kbus_bin.resolve())
    if interp is not None:
        paths += [interp, interp.resolve()]
    if package_dir is not None:
        paths.append(package_dir.resolve())
    return list(dict.fromkeys(paths))


def check_reachable(unit_texts: list[str], paths: list[Path]) -> None:
    """Refuse an ExecStart the units' own sandbox hides: with ProtectHome=yes a venv under /root or /home is not
    there for the service (systemd fails with status=203/EXEC), with PrivateTmp=yes one under /tmp is empty."""
    for setting, hidden in HIDING_SETTINGS:
        if not any(re.search(rf"^{re.escape(setting)}\s*$", t, re.MULTILINE) for t in unit_texts):
            continue
        for path in paths:
            for top in hidden:
                if path == Path(top) or Path(top) in path.parents:
                    raise InstallError(
                        f"the units' {setting} hides {top} from the service, so it could not run {path}: install "
                        "kbus in a venv outside /root, /home and /tmp made by a python3 outside them too (python3 -m "
                        "venv /opt/kbus/venv; /opt/kbus/venv/bin/pip install kbus) and run its kbus install-service"
                    )


def find_kbus_bin() -> Path:
    """The `kbus` entry point of the running installation (a venv's bin/kbus, or the one on PATH)."""
    argv0 = Path(sys.argv[0])
    candidates = [argv0 if argv0.name == "kbus" else None, Path(sys.prefix) / "bin" / "kbus"]
    found = shutil.which("kbus")
    candidates.append(Path(found) if found else None)
    for c in candidates:
        if c is not None and c.is_file() and os.access(c, os.X_OK):
            return c.absolute()
    raise InstallError("cannot find the kbus entry point; pass --kbus-bin /path/to/bin/kbus")


def _read_source(source: Path, rel: str) -> str:
    path = source / rel
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        raise InstallError(f"{path} not found: run from a kbus source tree or pass --source DIR") from None


def systemd_running() -> bool:
    return Path("/run/systemd/system").is_dir()


def _user_exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False


def _run(cmd: list[str], *, tolerate: bool = False) -> Callable[[], None]:
    def go() -> None:
        if shutil.which(cmd[0]) is None:
            raise InstallError(f"{cmd[0]} not found")
        res = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if res.returncode != 0 and not tolerate:
            reason = (res.stderr or res.stdout).strip().splitlines()
            raise InstallError(f"`{' '.join(cmd)}` failed: {reason[-1] if reason else f'exit {res.returncode}'}")

    return go


def _mkdir(path: Path, mode: int, owner: str | None) -> Callable[[], None]:
    def go() -> None:
        path.mkdir(parents=True, exist_ok=True)
        path.chmod(mode)
        if owner:
            shutil.chown(path, owner, owner)

    return go


def _write(path: Path, text: str, mode: int, group: str | None = None) -> Callable[[], None]:
    def go() -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.chmod(mode)
        if group:
            shutil.chown(tmp, "root", group)
        os.replace(tmp, path)

    return go


def _remove(path: Path) -> Callable[[], None]:
    def go() -> None:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)

    return go


def _noop() -> None:
    return None


def _under(root: Path, path: Path) -> Path:
    return root / path.relative_to("/")


def install_plan(
    kbus_bin: Path,
    root: Path = Path("/"),
    source: Path | None = None,
    force: bool = False,
    package_dir: Path | None = None,
) -> list[Action]:
    staged = root != Path("/")
    source = source or default_source()
    files = {
        CONFIG_DIR / "server.properties": server_properties(_read_source(source, "config/server.properties")),
        CONFIG_DIR / "zookeeper.properties": zookeeper_properties(_read_source(source, "config/zookeeper.properties")),
        CONFIG_DIR / "logging.yaml": _read_source(source, "config/logging.yaml"),
    }
    units = {UNIT_DIR / u: unit_text(_read_source(source, f"systemd/{u}"), kbus_bin) for u in UNITS}
    owner = None if staged else USER
    plan: list[Action] = []
    try:
        check_reachable(list(units.values()), service_paths(kbus_bin, package_dir))
    except InstallError as exc:
        if not staged:
            raise
        # a staged tree is a look or a package build: the units may end up on a host where these paths differ
        plan.append(Action(f"# WARNING {exc}", _noop))
    if not staged:
        if _user_exists(USER):
            plan.append(Action(f"# user {USER} exists", _noop))
        else:
            cmd = ["useradd", "--system", "--user-group", "--home-dir", str(STATE_DIR), "--no-create-home",
                   "--shell", "/usr/sbin/nologin", "--comment", "kbus message bus", USER]
            plan.append(Action(shlex.join(cmd), _run(cmd)))
    plan.append(Action(f"install -d -m 0755 {_under(root, CONFIG_DIR)}", _mkdir(_under(root, CONFIG_DIR), 0o755, None)))
    for d in (STATE_DIR, DATA_DIR, ZK_DATA_DIR, LOG_DIR):
        path = _under(root, d)
        own = f" -o {owner} -g {owner}" if owner else ""
        plan.append(Action(f"install -d -m 0750{own} {path}", _mkdir(path, 0o750, owner)))
    for dest, text in files.items():
        path = _under(root, dest)
        if path.exists() and not force:
            plan.append(Action(f"# keep existing {path} (--force replaces it)", _noop))
        else:
            # root-owned, readable by the service's group only: configs may come to hold credentials
            mode, group = (0o644, None) if staged else (0o640, USER)
            owner_note = f", group {group}" if group else ""
            desc = f"write {path} ({len(text.splitlines())} lines, mode {mode:04o}{owner_note})"
            plan.append(Action(desc, _write(path, text, mode, group)))
    for dest, text in units.items():
        path = _under(root, dest)
        plan.append(Action(f"write {path} (ExecStart={kbus_bin} ..., mode 0644)", _write(path, text, 0o644)))
    if staged:
        plan.append(Action("# staged under --prefix: no user created, no systemctl daemon-reload", _noop))
    elif systemd_running():
        plan.append(Action("systemctl daemon-reload", _run(["systemctl", "daemon-reload"])))
    else:
        plan.append(Action("# systemd is not running here: run `systemctl daemon-reload` once it is", _noop))
    return plan


def uninstall_plan(root: Path = Path("/"), purge: bool = False) -> list[Action]:
    staged = root != Path("/")
    plan: list[Action] = []
    live = not staged and systemd_running()
    if live:
        cmd = ["systemctl", "disable", "--now", *reversed(UNITS)]
        plan.append(Action(shlex.join(cmd), _run(cmd, tolerate=True)))
    for u in UNITS:
        path = _under(root, UNIT_DIR / u)
        plan.append(Action(f"rm -f {path}", _remove(path)))
    if live:
        plan.append(Action("systemctl daemon-reload", _run(["systemctl", "daemon-reload"])))
    elif not staged:
        plan.append(Action("# systemd is not running here: nothing to stop or reload", _noop))
    if purge:
        for d in (CONFIG_DIR, STATE_DIR, LOG_DIR):
            path = _under(root, d)
            plan.append(Action(f"rm -rf {path}", _remove(path)))
        if not staged and _user_exists(USER):
            plan.append(Action(f"userdel {USER}", _run(["userdel", USER])))
    else:
        kept = ", ".join(str(_under(root, d)) for d in (CONFIG_DIR, STATE_DIR, LOG_DIR))
        plan.append(Action(f"# keep {kept} and user {USER} (--purge removes them, data included)", _noop))
    return plan


def execute(plan: list[Action], dry_run: bool, echo: Callable[[str], None] = print) -> None:
    for action in plan:
        echo(action.describe)
        if not dry_run:
            try:
                action.run()
            except OSError as exc:
                raise InstallError(f"{action.describe}: {exc.strerror or exc}") from None
