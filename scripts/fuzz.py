"""Randomised runs past the suite's fixed seeds: the index against its model (``index``,
tests/test_search_state.py) and the server's write lane (``serve``, tests/test_serve_writes.py), seed after
seed until the time is up.

    python scripts/fuzz.py index --minutes 30 [--first-seed 1000] [--examples 40] [--steps 60]
    python scripts/fuzz.py serve --minutes 10 [--first-seed 1000] [--seconds 60] [--workers 2]

A failure stops the run: an index failure prints the steps that replay it (shrunk by hypothesis), a lane
failure each failing client's last requests; both print the seed (rerun it alone with ``--first-seed N
--seeds 1``). At the end: seeds, operations and wall time.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))


def fuzz_index(seed: int, args: argparse.Namespace) -> int:
    from hypothesis import settings

    import test_search_state as machine

    before = machine.IndexMachine.operations
    config = settings(machine.FIXED, max_examples=args.examples, stateful_step_count=args.steps)
    machine.run(seed, config)
    operations = machine.IndexMachine.operations - before
    print(f"  seed {seed}: {operations:,} operations", flush=True)
    return operations


def fuzz_serve(seed: int, args: argparse.Namespace) -> int:
    import test_serve_writes as lane

    with tempfile.TemporaryDirectory(prefix="staticsem-lane-") as folder:
        counts = lane.run_lane(
            lane.lane_model(Path(folder)), Path(folder), args.seconds, seed, args.clients, args.workers
        )
    print(f"  seed {seed}: {counts}", flush=True)
    return int(counts["operations"])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("what", choices=["index", "serve"])
    parser.add_argument("--minutes", type=float, default=10.0, help="stop starting new seeds after this")
    parser.add_argument("--first-seed", type=int, default=1000)
    parser.add_argument("--seeds", type=int, default=10**9, help="at most this many seeds")
    parser.add_argument("--examples", type=int, default=40, help="index: sequences per seed")
    parser.add_argument("--steps", type=int, default=60, help="index: at most this many steps a sequence")
    parser.add_argument("--seconds", type=float, default=60.0, help="serve: seconds of load per seed")
    parser.add_argument("--clients", type=int, default=4, help="serve: concurrent connections")
    parser.add_argument("--workers", type=int, default=2, help="serve: server processes")
    args = parser.parse_args()
    run = fuzz_index if args.what == "index" else fuzz_serve
    started, operations, seed = time.monotonic(), 0, args.first_seed
    try:
        while seed < args.first_seed + args.seeds and time.monotonic() - started < args.minutes * 60:
            operations += run(seed, args)
            seed += 1
    except BaseException:
        print(
            f"FAILED at seed {seed}; replay: python scripts/fuzz.py {args.what} --first-seed {seed} --seeds 1"
        )
        raise
    finally:
        minutes = (time.monotonic() - started) / 60
        print(
            f"{args.what}: seeds {args.first_seed}..{seed - 1}, {operations:,} operations, {minutes:.1f} min"
        )


if __name__ == "__main__":
    main()
