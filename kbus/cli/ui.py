"""`kbus ui`: the web console (kbus.ui), served by uvicorn on 127.0.0.1:8080 unless told otherwise."""

from __future__ import annotations

from typing import Annotated

import typer

from kbus.cli.app import app
from kbus.cli.client_config import translate, wire_security
from kbus.cli.common import UsageError, fail, load_properties


@app.command("ui")
def ui(
    bootstrap_server: Annotated[
        str, typer.Option("--bootstrap-server", help="The broker(s) to connect to, host:port,...")
    ] = "localhost:9092",
    command_config: Annotated[
        str | None,
        typer.Option("--command-config", help="Client .properties (TLS/SASL), as for the other commands"),
    ] = None,
    bind: Annotated[str, typer.Option("--bind", help="Address to listen on (localhost only by default)")]
    = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port to listen on")] = 8080,
    read_only: Annotated[bool, typer.Option("--read-only", help="Show, never change: every POST is refused")] = False,
    users_file: Annotated[
        str | None,
        typer.Option("--users-file", help="Require HTTP basic auth: lines name:password or name:password:read-only"),
    ] = None,
    lag_interval: Annotated[
        float, typer.Option("--lag-interval", help="Seconds between consumer-lag samples for the charts")
    ] = 5.0,
) -> None:
    """A web console: brokers, topics and messages, consumer groups and their lag over time, ACLs, SCRAM users,
    transactions (docs/ui.md)."""
    try:
        import uvicorn

        from kbus.ui.app import Console, UiSettings
        from kbus.ui.security import UsersFileError, load_users
    except ImportError as exc:
        fail(f"kbus ui needs the 'ui' extra (pip install 'kbus[ui]'): {exc}")
    try:
        conf = translate(load_properties(command_config)) if command_config else {}
        settings = UiSettings(
            bootstrap=bootstrap_server,
            client_conf=conf,
            security=wire_security(command_config),
            read_only=read_only,
            users=load_users(users_file) if users_file else None,
            lag_interval_s=max(lag_interval, 0.5),
        )
    except (UsageError, UsersFileError) as exc:
        fail(str(exc))
    if bind not in ("127.0.0.1", "localhost", "::1") and settings.users is None:
        typer.echo(f"WARN kbus ui listens on {bind} without --users-file: anyone who reaches it can use it", err=True)
    typer.echo(f"kbus ui on http://{bind}:{port}/ (cluster {bootstrap_server}{', read-only' if read_only else ''})",
               err=True)
    uvicorn.run(Console(settings).app(), host=bind, port=port, log_level="warning", access_log=False)
