"""The entry point: argument clean-up, Kafka script names as aliases, one-line parse errors, --version, every
command's --help, and a user's directory left as it was."""

import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.core import TyperGroup
from typer.testing import CliRunner

import kbus
from kbus.cli.commands import _fix_dashes, _resolve_alias, app, command_for_script
from tests.kbus_processes import free_port

KBUS = str(Path(sys.executable).parent / "kbus")


def run_kbus(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([KBUS, *args], capture_output=True, text=True, timeout=60, check=False)


def test_cli_accepts_typographic_dashes_from_blog_posts():
    assert _fix_dashes(["--topic", "t", "\u2013from-beginning", "\u2014topic", "-", "x"]) == [
        "--topic",
        "t",
        "--from-beginning",
        "--topic",
        "-",
        "x",
    ]


@pytest.mark.parametrize(
    ("script", "command"),
    [
        ("kafka-topics.sh", "topics"),
        ("kafka-topics", "topics"),
        ("bin/kafka-console-consumer.sh", "console-consumer"),
        ("./bin/kafka-server-start.sh", "server-start"),
        ("zookeeper-server-start.sh", "zookeeper-start"),
        ("zookeeper-server-stop", "zookeeper-stop"),
        ("kafka-consumer-groups.sh", "consumer-groups"),
        ("topics", "topics"),
    ],
)
def test_kafka_script_names_map_to_commands(script: str, command: str) -> None:
    assert command_for_script(script) == command


def test_only_known_commands_are_rewritten() -> None:
    assert _resolve_alias(["kafka-topics.sh", "--list"]) == ["topics", "--list"]
    assert _resolve_alias(["kafka-no-such-tool.sh"]) == ["kafka-no-such-tool.sh"]
    assert _resolve_alias(["--version"]) == ["--version"]


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["topics", "--bootstrap-server", "127.0.0.1:1", "--create", "--topic", "t", "--partitions", "abc"],
         "'--partitions'"),
        (["topics", "--bogus"], "--bogus"),
        (["console-consumer", "--topic"], "'--topic'"),
        (["kafka-topics.sh", "--replication-factor", "x"], "'--replication-factor'"),
        (["topcs"], "'topcs'"),
    ],
)
def test_parse_errors_are_one_line_naming_the_option(args: list[str], named: str) -> None:
    res = run_kbus(*args)
    assert res.returncode != 0
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert named in lines[0]
    assert "╭" not in res.stderr and "Traceback" not in res.stderr


def test_version() -> None:
    res = run_kbus("--version")
    assert res.returncode == 0
    assert res.stdout.strip() == f"kbus {kbus.__version__}"


def test_script_alias_runs_the_command() -> None:
    res = run_kbus("kafka-topics.sh", "--help")
    assert res.returncode == 0 and "kafka-topics.sh" in res.stdout


def kbus_commands() -> list[list[str]]:
    """Every command and sub-command of the typer app (the root as []), except those that hand --help on to the
    Kafka or Spark tool they run (connect-*, spark-submit: no help option of their own)."""
    found: list[list[str]] = []

    def walk(command: typer.core.TyperCommand | TyperGroup, path: list[str]) -> None:
        if command.add_help_option:
            found.append(path)
        if isinstance(command, TyperGroup):
            for name, sub in command.commands.items():
                walk(sub, [*path, name])

    walk(typer.main.get_command(app), [])
    return found


@pytest.mark.parametrize("command", kbus_commands(), ids=lambda c: " ".join(c) or "kbus")
def test_every_command_prints_its_help(command: list[str]) -> None:
    res = CliRunner().invoke(app, [*command, "--help"])
    assert res.exception is None, res.output
    assert res.exit_code == 0, res.output
    assert "Usage: " in res.output and "Traceback" not in res.output


def test_help_texts_print_as_written() -> None:
    """Kafka's syntax in a help text is not read as rich markup: `[/chroot]` crashed, `[v1,v2]` vanished."""
    assert "host:port[/chroot]" in CliRunner().invoke(app, ["zookeeper-shell", "--help"]).output
    assert "k2=[v1,v2]" in CliRunner().invoke(app, ["configs", "--help"]).output
    res = run_kbus("zookeeper-shell", "--help")
    assert res.returncode == 0 and "host:port[/chroot]" in res.stdout and res.stderr == ""


def test_kbus_leaves_the_current_directory_unchanged(tmp_path: Path) -> None:
    """kio imports hypothesis when it can, whose settings create `.hypothesis/` in the current directory: running
    kbus (help, a real command, the broker's entry point) must not, even with the test extra installed."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    closed = f"127.0.0.1:{free_port()}"
    runs = {
        "help": ([KBUS, "--help"], 0),
        "version": ([KBUS, "--version"], 0),
        "topics help": ([KBUS, "topics", "--help"], 0),
        "topics list": ([KBUS, "topics", "--bootstrap-server", closed, "--list"], 1),  # connects: imports it all
        "broker help": ([sys.executable, "-m", "kbus.server", "--help"], 0),
    }
    for name, (argv, code) in runs.items():
        res = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=60, check=False)
        assert res.returncode == code, (name, res.stderr)
        assert "Traceback" not in res.stderr, name
    assert sorted(p.name for p in cwd.iterdir()) == []
