"""Only the compiled part of kbus lives here (everything else is in pyproject.toml).

Two kinds of C extension, both optional: with no working C compiler (or KBUS_PURE_PYTHON=1) kbus installs as pure
Python, the same code, slower per request (tests/e2e/test_pure_python_install.py installs it that way).
- kbus/protocol/_recordscan.c: the record scan that produce validation runs on every batch
  (kbus/protocol/record_scan.py says why; record_scan.scan_py is its Python twin).
- mypyc: the typed modules every Produce, Fetch and Metadata request runs through (COMPILED below), compiled from
  their own source into one shared library, kbus/_hotpath__mypyc*.so, and a stub per module beside its .py. An
  extension module shadows the .py of the same name, so after editing one of these in an editable install, run
  `pip install -e .` (scripts/setup.sh) again; tests/conftest.py refuses to run against a stale one.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile

from setuptools import Extension, setup

# Per-request code with no monkeypatching, no interpreted subclasses and no dynamic attributes (mypyc's limits).
# Left interpreted: kbus/server/util/eager.py (its coroutine trampoline: mypyc refuses its generator),
# kbus/server/util/metrics.py (mypyc cannot generate its **labels signatures), kbus/protocol/fetch_request.py (the
# follower's Fetch encoder: a compiled FetchRequestV12 refuses its own ClassVar api_key at construction). A compiled
# class's methods are read-only on its instances, a wrapper set on the class is skipped by compiled callers, and it
# cannot be subclassed by interpreted code: tests inject faults below it (os.fsync) or build the real object
# (tests/unit/test_api_handlers.py's fake_partition is a Partition over a Log that is never opened).
# Compiled code checks argument and return types at run time: a test's fake must be of the declared class.
# kbus/server/network/processor.py's KafkaProtocol subclasses asyncio.Protocol (an interpreted class), so mypyc makes
# it a regular Python class with compiled methods: bench/lib/latprobe.py can still wrap its data_received.
COMPILED = [
    "kbus/common/clock.py",
    "kbus/common/topics.py",
    "kbus/protocol/bounds.py",
    "kbus/protocol/codec.py",
    "kbus/protocol/connection.py",
    "kbus/protocol/fetch_request_decode.py",
    "kbus/protocol/fetch_response.py",
    "kbus/protocol/group_requests.py",
    "kbus/protocol/group_responses.py",
    "kbus/protocol/request_body.py",
    "kbus/protocol/request_reader.py",
    "kbus/protocol/metadata_response.py",
    "kbus/protocol/produce_request_decode.py",
    "kbus/protocol/produce_response.py",
    "kbus/protocol/record_batch.py",
    "kbus/protocol/splice.py",
    "kbus/protocol/validation.py",
    "kbus/server/apis/context.py",
    "kbus/server/apis/fetch.py",
    "kbus/server/apis/heartbeat.py",
    "kbus/server/apis/metadata.py",
    "kbus/server/apis/offset_commit.py",
    "kbus/server/apis/produce.py",
    "kbus/server/coordinator/commit_batch.py",
    "kbus/server/coordinator/commit_path.py",
    "kbus/server/coordinator/state_path.py",
    "kbus/server/coordinator/timers.py",
    "kbus/server/log/epochs.py",
    "kbus/server/log/index.py",
    "kbus/server/log/log.py",
    "kbus/server/log/producer_state.py",
    "kbus/server/log/segment.py",
    "kbus/server/network/idle_expiry.py",
    "kbus/server/network/processor.py",
    "kbus/server/network/sendfile.py",
    "kbus/server/network/socket_server.py",
    "kbus/server/partition/partition.py",
    "kbus/server/replication/fetch_session.py",
    "kbus/server/replication/fetcher.py",
    "kbus/server/replication/replica_manager.py",
    "kbus/server/replication/session.py",
    "kbus/server/util/histogram.py",
]


def _say(message: str) -> None:
    print(f"kbus setup.py: {message}", file=sys.stderr)


def _compiler_works() -> bool:
    """Can this machine build a Python extension? (the compiler setuptools would use, and Python.h)"""
    if not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")):
        return False
    cc = (os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc").split()
    if not cc or shutil.which(cc[0]) is None:
        return False
    with tempfile.TemporaryDirectory() as tmp:
        source = os.path.join(tmp, "probe.c")
        with open(source, "w") as f:
            f.write("#include <Python.h>\nint main(void) { return 0; }\n")
        include = "-I" + sysconfig.get_paths()["include"]
        try:
            done = subprocess.run([*cc, include, "-c", source, "-o", os.path.join(tmp, "probe.o")],
                                  capture_output=True, timeout=120)  # fmt: skip
        except (OSError, subprocess.SubprocessError):
            return False
        return done.returncode == 0


def _ext_modules() -> list[Extension]:
    if os.environ.get("KBUS_PURE_PYTHON", "") not in ("", "0"):
        _say("KBUS_PURE_PYTHON is set: installing kbus as pure Python")
        return []
    if not _compiler_works():
        _say("no working C compiler (or no Python.h): installing kbus as pure Python, slower per request")
        return []
    modules = [Extension("kbus.protocol._recordscan", ["kbus/protocol/_recordscan.c"], extra_compile_args=["-O2"])]
    if os.environ.get("KBUS_MYPYC", "1") == "0":
        _say("KBUS_MYPYC=0: the hot-path modules stay interpreted")
        return modules
    try:
        from mypyc.build import mypycify
    except ImportError:
        _say("mypyc is not installed (pip install mypy): the hot-path modules stay interpreted")
        return modules
    # group_name puts the shared library inside the kbus package (kbus/_hotpath__mypyc*.so), where an editable
    # install's finder looks, instead of at the top level of site-packages under a hash
    return modules + mypycify(COMPILED, opt_level="3", debug_level="0", group_name="kbus._hotpath")


setup(ext_modules=_ext_modules())
