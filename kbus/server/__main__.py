"""`python -m kbus.server [server.properties] [--override key=value ...]`"""

import argparse
import sys

from kbus.server.main import run


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m kbus.server")
    parser.add_argument("config", nargs="?")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()
    return run(args.config, args.override)


if __name__ == "__main__":
    sys.exit(main())
