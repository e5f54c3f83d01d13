"""Run a benchmark script under cProfile and print where its CPU went (top functions).

`python bench/_profile.py bench/groupby_bench.py --rows 100000` runs the script as
`__main__` with its own arguments, then prints the 30 functions with the most own time
and the 15 with the most cumulative time. `bench/run.py --profile` uses it for the
in-process benchmarks; the end-to-end ones profile the server process with py-spy.
"""

from __future__ import annotations

import cProfile
import pstats
import runpy
import sys
from pathlib import Path


def main() -> None:
    script = sys.argv[1]
    sys.argv = sys.argv[1:]
    sys.path.insert(0, str(Path(script).resolve().parent))
    prof = cProfile.Profile()
    try:
        prof.runcall(runpy.run_path, script, run_name="__main__")
    finally:
        stats = pstats.Stats(prof, stream=sys.stdout)
        print(f"\nprofile of {script}: top by own time")
        stats.sort_stats("tottime").print_stats(30)
        print("top by cumulative time")
        stats.sort_stats("cumulative").print_stats(15)


if __name__ == "__main__":
    main()
