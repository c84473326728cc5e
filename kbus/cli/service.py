"""`kbus install-service`, `kbus uninstall-service` (systemd) and `kbus broker-health`."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from kbus.cli.app import app
from kbus.cli.common import UsageError, fail


@app.command("install-service")
def install_service(
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print each action without doing it")] = False,
    prefix: Annotated[
        Path, typer.Option("--prefix", help="Install under this root instead of / (staging: no user, no systemctl)")
    ] = Path("/"),
    kbus_bin: Annotated[
        Path | None, typer.Option("--kbus-bin", help="kbus entry point the units run (default: this one)")
    ] = None,
    source: Annotated[
        Path | None,
        typer.Option("--source", help="Holds config/ and systemd/ (default: this checkout, else <venv>/share/kbus)"),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace existing files in /etc/kbus")] = False,
) -> None:
    """Install kbus as systemd services: user kbus, /etc/kbus, /var/lib/kbus, /var/log/kbus, kbus-zookeeper.service
    and kbus.service; then `systemctl enable --now kbus`."""
    import kbus
    from kbus.ops import install

    root = prefix.absolute()
    if not dry_run and root == Path("/") and os.geteuid() != 0:
        fail("ERROR install-service needs root (try sudo, or --dry-run to see what it would do)")
    try:
        binary = kbus_bin.absolute() if kbus_bin else install.find_kbus_bin()
        if not (binary.is_file() and os.access(binary, os.X_OK)):
            raise install.InstallError(f"--kbus-bin {binary} is not an executable file")
        # the units run this very installation unless --kbus-bin names another: its package must be reachable too
        package_dir = None if kbus_bin else Path(kbus.__file__).parent
        plan = install.install_plan(binary, root, source, force, package_dir)
        install.execute(plan, dry_run)
    except (install.InstallError, UsageError) as exc:
        fail(f"ERROR {exc}")
    if not dry_run and root == Path("/"):
        print("Installed. Start with: systemctl enable --now kbus.service (logs: journalctl -u kbus -u kbus-zookeeper)")


@app.command("uninstall-service")
def uninstall_service(
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print each action without doing it")] = False,
    prefix: Annotated[Path, typer.Option("--prefix", help="The root given to install-service --prefix")] = Path("/"),
    purge: Annotated[
        bool, typer.Option("--purge", help="Also remove /etc/kbus, /var/lib/kbus (all data), /var/log/kbus, user kbus")
    ] = False,
) -> None:
    """Stop and remove the kbus systemd services; config, data and the user stay unless --purge."""
    from kbus.ops import install

    root = prefix.absolute()
    if not dry_run and root == Path("/") and os.geteuid() != 0:
        fail("ERROR uninstall-service needs root (try sudo, or --dry-run to see what it would do)")
    try:
        install.execute(install.uninstall_plan(root, purge), dry_run)
    except install.InstallError as exc:
        fail(f"ERROR {exc}")


@app.command("broker-health")
def broker_health(
    bootstrap_server: Annotated[
        str, typer.Option("--bootstrap-server", help="The broker to check, host:port")
    ] = "localhost:9092",
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds to wait for the broker's metadata")] = 10.0,
    command_config: Annotated[
        str | None, typer.Option("--command-config", help="Client .properties for a TLS/SASL listener")
    ] = None,
) -> None:
    """Exit 0 when the broker answers and every partition it hosts is in sync; otherwise print one line, exit 1."""
    from kbus.cli.client_config import translate
    from kbus.cli.common import load_properties
    from kbus.ops.health import BrokerUnreachable, check_over_wire

    try:
        conf = translate(load_properties(command_config)) if command_config else None
        report = check_over_wire(bootstrap_server, timeout, conf)
    except UsageError as exc:
        fail(f"ERROR {exc}")
    except BrokerUnreachable as exc:
        fail(f"ERROR kbus broker at {bootstrap_server} is not answering: {exc}")
    if not report.healthy:
        fail(f"ERROR {report.summary()}")
    print(f"OK {report.summary()}")
