"""`python -m kbus.server.broker_process <config> --override ...`: one broker of a `num.broker.processes` set, started
by kbus.server.broker_set with its derived overrides. A module of its own so `kbus server-stop` (which signals
`kbus server-start` and `python -m kbus.server` processes) signals only the supervisor, which stops the set."""

import sys

from kbus.server.__main__ import main

if __name__ == "__main__":
    sys.exit(main())
