"""The one typer app every command module registers on (`from kbus.cli.app import app`)."""

import typer

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    help="kbus: a lightweight Kafka-compatible message bus. Subcommands mirror Kafka's scripts.",
)
