"""The one typer app every command module registers on (`from kbus.cli.app import app`)."""

import typer

import kbus

# Help texts print as written (rich_markup_mode=None): they quote Kafka's syntax, whose brackets rich would read as
# markup tags (`host:port[/chroot]` crashed `kbus zookeeper-shell --help`; `k2=[v1,v2]` vanished from configs').
HELP_MARKUP = None

app = typer.Typer(
    no_args_is_help=True,
    rich_markup_mode=HELP_MARKUP,
    add_completion=False,
    pretty_exceptions_enable=False,
    help="kbus: a lightweight Kafka-compatible message bus. Subcommands mirror Kafka's scripts "
    "(Kafka's script names work too: `kbus kafka-topics.sh --list ...`).",
)


def _print_version(value: bool) -> None:
    if value:
        # Kafka's tools print the bare version on --version (`kafka-topics.sh --version` -> `3.7.0`).
        typer.echo(f"kbus {kbus.__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", "-V", help="Print the kbus version and exit.", callback=_print_version, is_eager=True
    ),
) -> None:
    """kbus: a lightweight Kafka-compatible message bus. Subcommands mirror Kafka's scripts (Kafka's script names
    work too: `kbus kafka-topics.sh --list ...`)."""
