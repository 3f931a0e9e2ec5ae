"""The top entries of a py-spy raw profile (collapsed stacks), inclusive and self.

    .venv/bin/python bench/profile_top.py PROFILE.txt [--top 30] [--match WORD ...]

Frames are counted without their line numbers, each at most once per stack
(inclusive), and as the stack's last frame (self). `--match` prints the
inclusive share of every frame whose name contains one of the words, so two
profiles (an agents' process, a floor client's) can be read side by side.
"""

from __future__ import annotations

import argparse
import collections
import re
from pathlib import Path

LINE = re.compile(r" \((.*?)(?::\d+)?\)$")


def frame_name(frame: str) -> str:
    """`func (file.py:12)` -> `func (file.py)`; native frames keep their library."""
    return LINE.sub(lambda m: f" ({m.group(1)})", frame.strip())


def read(path: Path) -> tuple[int, collections.Counter[str], collections.Counter[str]]:
    total = 0
    inclusive: collections.Counter[str] = collections.Counter()
    own: collections.Counter[str] = collections.Counter()
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        n = int(count)
        frames = [frame_name(f) for f in stack.split(";")]
        total += n
        for name in set(frames):
            inclusive[name] += n
        own[frames[-1]] += n
    return total, inclusive, own


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("profile", type=Path)
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--match", nargs="*", default=[])
    args = parser.parse_args()
    total, inclusive, own = read(args.profile)
    print(f"{args.profile}: {total} samples")
    if args.match:
        for name, n in inclusive.most_common():
            if any(word in name for word in args.match):
                print(f"  incl {100 * n / total:5.1f}%  {name}")
        return
    print("inclusive:")
    for name, n in inclusive.most_common(args.top):
        print(f"  {100 * n / total:5.1f}%  {name}")
    print("self:")
    for name, n in own.most_common(args.top):
        print(f"  {100 * n / total:5.1f}%  {name}")


if __name__ == "__main__":
    main()
