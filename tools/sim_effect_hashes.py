"""Hash every effect the simulator executes, per seed: proof that a change to the
core leaves a run byte-identical (e.g. KIP-853 behind kraft.version 0).

It hooks `Simulation._execute` from outside, so it runs against any checkout:

    PYTHONPATH=/path/to/main   .venv/bin/python tools/sim_effect_hashes.py 0 1000 > main.txt
    PYTHONPATH=/path/to/branch .venv/bin/python tools/sim_effect_hashes.py 0 1000 > branch.txt
    diff <(cut -d' ' -f1,2 main.txt) <(cut -d' ' -f1,2 branch.txt)

Each line is `seed sha256`; a seed whose effects (time, node, effect) differ in
anything, order included, differs there.
"""

from __future__ import annotations

import hashlib
import sys

from quorum.sim.cluster import SimNode, Simulation
from quorum.sim.faults import mix_for_seed


def main(argv: list[str]) -> int:
    first, count = int(argv[0]), int(argv[1])
    execute = Simulation._execute
    digests: dict[int, hashlib._Hash] = {}

    def hooked(sim: Simulation, node: SimNode, effect: object) -> None:
        digests[id(sim)].update(f"{sim.now_us}|{node.node_id}|{effect!r}\n".encode())
        execute(sim, node, effect)

    Simulation._execute = hooked  # type: ignore[method-assign]
    for seed in range(first, first + count):
        sim = Simulation(seed, mix_for_seed(seed), liveness_bound_ms=10_000)
        digests[id(sim)] = hashlib.sha256()
        sim.run()
        print(f"{seed} {digests.pop(id(sim)).hexdigest()}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
