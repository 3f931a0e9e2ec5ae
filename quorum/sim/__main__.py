"""Replay or explore simulator seeds: `python -m quorum.sim --seed 7 --mix chaos -v`."""

from __future__ import annotations

import argparse
import sys

from quorum.sim.cluster import Simulation
from quorum.sim.faults import MIXES, mix_for_seed
from quorum.sim.invariants import InvariantViolation


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m quorum.sim", description=__doc__)
    parser.add_argument("--seed", type=int, default=0, help="first seed")
    parser.add_argument("--seeds", type=int, default=1, help="how many seeds from --seed")
    parser.add_argument("--mix", choices=sorted(MIXES), help="fault mix (default: by seed)")
    parser.add_argument("--voters", type=int, default=3)
    parser.add_argument("--observers", type=int, default=0)
    parser.add_argument("--fault-ms", type=int, default=8000, help="how long the faults last")
    parser.add_argument(
        "--membership",
        action="store_true",
        help="kraft.version 1: add and remove voters (observers are the ones to add)",
    )
    parser.add_argument(
        "--kraft-upgrade",
        action="store_true",
        help="start at kraft.version 0 and upgrade to 1 first (then as --membership)",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="print every fault/election")
    args = parser.parse_args(argv)
    failures = 0
    for seed in range(args.seed, args.seed + args.seeds):
        mix = MIXES[args.mix] if args.mix else mix_for_seed(seed)
        sim = Simulation(
            seed,
            mix,
            voters=args.voters,
            observers=args.observers,
            membership=args.membership,
            kraft_upgrade=args.kraft_upgrade,
            fault_ms=args.fault_ms,
            trace=print if args.verbose else None,
        )
        try:
            result = sim.run()
        except InvariantViolation as exc:
            failures += 1
            print(f"seed {seed} mix {mix.name}: FAILED\n{exc}", file=sys.stderr)
            continue
        print(
            f"seed {seed} mix {mix.name}: ok, {result.acked} acked, {result.elections} elections, "
            f"epoch {result.max_epoch}, recovered {result.recovery_ms:.0f} ms after faults ended"
        )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
