"""The `kbus` entry point: one typer app whose subcommands mirror Kafka's scripts."""

import typer

app = typer.Typer(no_args_is_help=True, add_completion=False, help="kbus: a lightweight Kafka-compatible message bus")


def main() -> None:
    app()
