"""`python -m kbus.server [server.properties] [--override key=value ...]`"""

import argparse
import sys

from kbus.common.no_test_tools import keep_test_tools_out

keep_test_tools_out()  # before kbus.server.main imports kio; kbus.server.broker_process runs this module too

from kbus.server.main import run  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m kbus.server")
    parser.add_argument("config", nargs="?")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()
    return run(args.config, args.override)


if __name__ == "__main__":
    sys.exit(main())
