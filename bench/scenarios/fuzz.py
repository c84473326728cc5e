"""The long fuzz run (issue 10): >= 100,000 mutated frames against a real broker, then the checks the suite's
short run makes (tests/integration/test_fuzz_frames.py), with the broker's RSS before/after.

usage: bench/scenarios/fuzz.sh [FRAMES] [SEED]   (starts its own broker; result JSON on stdout, see bench/notes/FUZZ.md)
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from tests.fuzzing import main  # the fuzzer lives with the tests that use it

if __name__ == "__main__":
    sys.exit(main())
