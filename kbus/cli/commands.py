"""Every `kbus` command, and the argument fixes run before typer parses (typographic dashes, Kafka's script names).
Each command family lives in its own module and registers itself on `app`; importing the module is all it takes
(one import line per module below). The console script is kbus.cli.main, which keeps test tools out first."""

# Command modules (import for their registration side effect).
# ruff: noqa: F401
import os
import sys
from pathlib import PurePath

import typer

import kbus.cli.acls
import kbus.cli.configs
import kbus.cli.connect
import kbus.cli.console_consumer
import kbus.cli.console_producer
import kbus.cli.console_share_consumer
import kbus.cli.consumer_groups
import kbus.cli.dump_log
import kbus.cli.leader_election
import kbus.cli.log_dirs
import kbus.cli.offsets
import kbus.cli.reassign
import kbus.cli.server
import kbus.cli.service
import kbus.cli.share_groups
import kbus.cli.spark
import kbus.cli.topics
import kbus.cli.transactions
import kbus.cli.ui
import kbus.cli.zk_security_migration
import kbus.cli.zookeeper
from kbus.cli import stdout
from kbus.cli.app import app


def _fix_dashes(args: list[str]) -> list[str]:
    """Blog posts (the seed articles among them) print `--from-beginning` with an en or em dash (U+2013, U+2014)
    after typographic substitution; accept what users paste, and say so on stderr."""
    out = []
    for a in args:
        if a[:1] in ("\u2013", "\u2014") and len(a) > 1:
            fixed = "--" + a[1:]
            print(f"WARN '{a}' read as '{fixed}'", file=sys.stderr)
            a = fixed
        out.append(a)
    return out


def command_for_script(name: str) -> str:
    """Kafka's script name -> the kbus command, so commands pasted from Kafka's docs work:
    `bin/kafka-topics.sh` and `kafka-topics` -> `topics`, `zookeeper-server-start.sh` -> `zookeeper-start`.
    Anything else comes back unchanged."""
    base = PurePath(name).name
    for suffix in (".sh", ".bat"):
        base = base.removesuffix(suffix)
    if base.startswith("zookeeper-server-"):
        return "zookeeper-" + base.removeprefix("zookeeper-server-")
    return base.removeprefix("kafka-")


def _command_names() -> set[str]:
    return set(typer.main.get_command(app).commands)  # type: ignore[attr-defined]


def _resolve_alias(args: list[str]) -> list[str]:
    if not args or args[0].startswith("-"):
        return args
    names = _command_names()
    if args[0] in names:
        return args
    mapped = command_for_script(args[0])
    return [mapped, *args[1:]] if mapped in names else args


def main() -> None:
    stdout.install()
    args = _resolve_alias(_fix_dashes(sys.argv[1:]))
    try:
        rv = app(args=args, prog_name="kbus", standalone_mode=False)
    except typer.TyperException as exc:
        # One line naming the option, like Kafka's joptsimple errors; never typer's boxed panel.
        message = exc.format_message().strip()
        if message:  # empty when `kbus` alone printed the help (no_args_is_help)
            where = f"kbus {args[0]}" if args and args[0] in _command_names() else "kbus"
            print(f"{where}: {message}", file=sys.stderr, flush=True)
        sys.exit(exc.exit_code)
    except typer.Abort:
        print("Aborted.", file=sys.stderr, flush=True)
        sys.exit(1)
    except Exception as exc:
        # A bug, not a usage error: still one line (KBUS_DEBUG=1 shows the traceback)
        if os.environ.get("KBUS_DEBUG"):
            raise
        where = f"kbus {args[0]}" if args and args[0] in _command_names() else "kbus"
        print(f"{where}: ERROR {type(exc).__name__}: {exc} (KBUS_DEBUG=1 shows where)", file=sys.stderr, flush=True)
        sys.exit(1)
    sys.exit(rv if isinstance(rv, int) else 0)
