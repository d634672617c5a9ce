"""Time each stage of `make test` against its budget, as `make test` runs them, and report the machine's speed.

Usage: python bench/time_test.py [--clone]      (`make time-test`)

`make test` runs lint, then two lanes side by side, each on one thread: the student-edition pass on the second numeric
path (`make notebooks-student`), and the website build with warnings as errors followed by the unit tests (`make
build-check`, then `make unit` on that site) and the Colab pass (`make notebooks`). This script starts the same
commands the same way and times each one; the total is lint plus the slowest lane. With --clone it first clones the
repository's committed state into a temporary folder and times `make install` there too, as a newcomer's fresh
clone would run it.

The machine's speed is measured before and after (fp32 matrix products, 2048 x 2048, on every core), because a
shared machine's speed changes while the tests run. Budgets are checked here, never by a timed test. Exits 1 if a
stage is over its budget or failed.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Seconds, on the quiet 2-core reference machine (the book's plan): `make test` within 12 minutes with 16 chapters
# (10 with 13), the unit tests within 3 of them; the notebook passes' budgets are what fits those two.
BUDGETS = {
    "install": None,  # not part of `make test`; reported only
    "lint": 15,
    "build-check": 60,
    "unit": 180,
    "notebooks": 420,
    "notebooks-student": 690,
    "make test": 720,
}


def gflops(seconds: float = 3.0) -> float:
    """fp32 matrix-product speed of this machine now, on every core (GFLOP/s), in a fresh process."""
    code = ("import time, torch\n"
            "a, b = torch.randn(2048, 2048), torch.randn(2048, 2048)\n"
            "for _ in range(3): a @ b\n"
            "n, start = 0, time.perf_counter()\n"
            f"while time.perf_counter() - start < {seconds}:\n"
            "    a @ b; n += 1\n"
            "print(2 * 2048 ** 3 * n / (time.perf_counter() - start) / 1e9)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return float(out)


def run(name: str, command: list[str], cwd: Path, env: dict, times: dict, failures: list, log: Path) -> None:
    """Run one stage; record its wall time (seconds) and whether it failed; its output goes to `log`."""
    start = time.perf_counter()
    with log.open("w") as out:
        code = subprocess.run(command, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT).returncode
    times[name] = time.perf_counter() - start
    if code != 0:
        failures.append(f"{name} (exit {code}, see {log})")


def lane(stages: list[tuple[str, list[str], dict]], cwd: Path, env: dict, times: dict, failures: list,
         logs: Path) -> None:
    for name, command, extra in stages:
        run(name, command, cwd, {**env, **extra}, times, failures, logs / f"{name}.log")
        if failures and failures[-1].startswith(name):
            return


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clone", action="store_true", help="time a fresh clone of the committed state")
    args = parser.parse_args()

    env = {**os.environ}
    env.pop("MAKEFLAGS", None)  # started from `make time-test`: the stages are not sub-makes of it
    logs = Path(tempfile.mkdtemp(prefix="tfm-time-test-"))
    where = ROOT
    times: dict[str, float] = {}
    failures: list[str] = []
    before = gflops()
    if args.clone:
        where = logs / "clone"
        subprocess.run(["git", "clone", "--quiet", str(ROOT), str(where)], check=True)
        run("install", ["make", "install"], where, env, times, failures, logs / "install.log")
        if failures:
            print(f"install failed: {failures}")
            return 1
    make = ["make", "--no-print-directory"]
    run("lint", [*make, "lint"], where, env, times, failures, logs / "lint.log")
    one_thread = {**env, "OMP_NUM_THREADS": "1"}
    site = {"TFM_SITE": str(where / "_build" / "html")}
    lanes = [
        [("notebooks-student", [*make, "notebooks-student"], {})],
        [("build-check", [*make, "build-check"], {}), ("unit", [*make, "unit"], site),
         ("notebooks", [*make, "notebooks"], {})],
    ]
    started = time.perf_counter()
    threads = [threading.Thread(target=lane, args=(stages, where, one_thread, times, failures, logs))
               for stages in lanes]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    times["make test"] = times["lint"] + time.perf_counter() - started
    after = gflops()

    print(f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, fp32 matrix products "
          f"{before:.0f} GFLOP/s before and {after:.0f} after; {'a fresh clone' if args.clone else 'this checkout'}, "
          f"{time.strftime('%Y-%m-%d')}\n")
    print("| stage | budget | measured | |\n| --- | ---: | ---: | --- |")
    over = []
    for name, budget in BUDGETS.items():
        if name not in times:
            continue
        verdict = "" if budget is None else "ok" if times[name] <= budget else "OVER"
        if verdict == "OVER":
            over.append(name)
        shown = "" if budget is None else f"{budget} s"
        print(f"| {name} | {shown} | {times[name]:.0f} s | {verdict} |")
    print(f"\nlogs: {logs}")
    if failures:
        print(f"failed: {', '.join(failures)}")
    if over:
        print(f"over budget: {', '.join(over)}")
    return 1 if failures or over else 0


if __name__ == "__main__":
    sys.exit(main())
