"""The `kbus` console script (pyproject's [project.scripts]). Kept apart from the commands (kbus.cli.commands) so
test-only libraries are marked absent before any command module imports kio: see kbus.common.no_test_tools."""

from kbus.common.no_test_tools import keep_test_tools_out


def main() -> None:
    keep_test_tools_out()
    from kbus.cli.commands import main as run_command  # after the line above: it imports kio

    run_command()


if __name__ == "__main__":
    main()
