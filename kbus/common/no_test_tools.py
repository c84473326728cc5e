"""Keep test-only libraries out of kbus's processes.

kio (the Kafka message classes) imports hypothesis when it can, at import time, to register a test-data strategy
for each of its field types: with the test extra installed that costs most of a second of start-up, and
hypothesis's settings then create `.hypothesis/` in the current directory, so a user's directory changed because
they ran `kbus --help`. kbus never generates test data, so each process entry point (the `kbus` console script,
`python -m kbus.server`, a broker process) marks hypothesis absent before anything imports kio. Tests import kbus's
modules directly, not these entry points, and keep hypothesis."""

import sys

TEST_ONLY_MODULES = ("hypothesis",)


def keep_test_tools_out() -> None:
    """A None entry in sys.modules makes `import hypothesis...` raise ModuleNotFoundError, which kio takes as
    "hypothesis not installed". A module some caller already imported stays."""
    for name in TEST_ONLY_MODULES:
        if name not in sys.modules:
            sys.modules[name] = None  # type: ignore[assignment]  # the import system's documented "not found" marker
