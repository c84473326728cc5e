"""py-spy raw (collapsed) stacks -> the busiest thread's samples by function: inclusive and self shares.
    python stacks.py FILE.raw [--top N] [--match SUBSTRING ...] (only stacks holding one of the substrings)"""

from __future__ import annotations

import argparse
import collections
import re


def name(frame: str) -> str:
    frame = re.sub(r" \([^()]*\)$", "", frame.strip())  # py-spy's " (file.py:line)" / " (lib.so)"
    return re.sub(r"^CPyDef_|^CPyPy_", "", frame)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("raw")
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--match", nargs="*", default=None)
    a = ap.parse_args()
    # the event loop's thread: stacks through uv_run; minus its idle samples (in epoll_wait: py-spy --native counts
    # a thread blocked in a system call as busy)
    stacks: list[tuple[list[str], int]] = []
    idle = 0
    with open(a.raw) as f:
        lines = f.read().splitlines()
    for line in lines:
        if not line:
            continue
        stack, _, count = line.rpartition(" ")
        frames = [name(f) for f in stack.split(";")]
        if "uv_run" not in frames:
            continue
        if any(f.startswith(("epoll_wait", "epoll_pwait", "__GI_epoll_pwait")) for f in frames[-3:]):
            idle += int(count)
            continue
        stacks.append((frames, int(count)))
    thread = f"event loop (idle samples left out: {idle})"
    total = sum(c for _, c in stacks)
    if a.match:
        stacks = [(f, c) for f, c in stacks if any(any(m in x for x in f) for m in a.match)]
    incl: collections.Counter[str] = collections.Counter()
    own: collections.Counter[str] = collections.Counter()
    for frames, c in stacks:
        for f in set(frames):
            incl[f] += c
        if frames:
            own[frames[-1]] += c
    print(f"{thread}: {total} samples; {sum(c for _, c in stacks)} shown")
    print("inclusive:")
    for f, c in incl.most_common(a.top):
        print(f"  {c:6d} {100 * c / total:5.1f}%  {f}")
    print("self:")
    for f, c in own.most_common(a.top):
        print(f"  {c:6d} {100 * c / total:5.1f}%  {f}")


if __name__ == "__main__":
    main()
