"""The robustness sweep: re-run every trained claim of the book over seeds and numeric paths, and tabulate it.

Usage: python -m tools.book.robustness [--seeds 5] [--paths default mkl-compatible ...] [--chapters 05 06]
(`make robustness` runs it with the defaults and writes appendices/robustness.json and appendices/robustness.md, which
the appendix "How this book is checked" includes.) A sweep of some chapters only (--chapters) writes to a temporary
file instead; `--merge FILE.json ...` combines such partial sweeps, run with the same seeds and paths, into the book's
table.

A claim is declared where it is made: a code cell of a chapter carries, in its metadata, a list under "claims",

    {"claims": [{"name": "held-out accuracy", "value": "accuracy", "at_least": 0.95, "format": ".1%"}]}

where "value" is a Python expression evaluated in the notebook's namespace right after that cell, and "at_least"
(or "at_most") is the bound that the cell asserts ("format": "yes" marks a yes/no claim, valued 1 or 0, with
"at_least": 1 or "at_most": 0). A claim without a bound is recorded, not asserted: an outcome that varies from run
to run, which the prose quotes as a count ("learned in 9 of 15 runs"). For each numeric path and each seed offset k,
the notebook is
executed from a copy, up to its last claim, with TFM_SEED_OFFSET=k (every `tfm.seed_everything` and `tfm.generator`
seed shifts by k; the data sets stay the same), and the values are read back. Errors do not stop a run: a seed that
breaks a notebook's assertion is recorded as such. The table gives each claim's range over all runs and whether the
bound held in every run, with the machine and the date. Each notebook runs with one thread (OMP_NUM_THREADS=1,
as `make test` runs them) unless the environment sets another count.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat

from tools.book.notebooks import ROOT, execute, notebooks

# Numeric paths: each changes the bits of softmax, attention or matrix products on the reference CPU.
PATHS = {
    "default": {},
    "aten-default": {"ATEN_CPU_CAPABILITY": "default"},
    "mkl-compatible": {"MKL_CBWR": "COMPATIBLE"},
}
PROBE = "import json as _json\nprint('TFM-CLAIMS ' + _json.dumps({claims}))"


def claims_of(nb: nbformat.NotebookNode) -> list[tuple[int, dict]]:
    """(cell index, claim) for every claim declared in the notebook, in order."""
    return [(i, claim) for i, cell in enumerate(nb.cells) for claim in cell.metadata.get("claims", [])]


def probed(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The notebook up to its last claim, with a probe cell after each cell that declares claims."""
    found = claims_of(nb)
    last = max(i for i, _ in found)
    cells = []
    for cell in nb.cells[: last + 1]:
        cells.append(cell)
        declared = cell.metadata.get("claims", [])
        if declared:
            expressions = "{" + ", ".join(f"{c['name']!r}: float({c['value']})" for c in declared) + "}"
            cells.append(nbformat.v4.new_code_cell(PROBE.format(claims=expressions)))
    copy = nbformat.from_dict(nb)
    copy.cells = cells
    return copy


def read_probes(nb: nbformat.NotebookNode) -> tuple[dict[str, float], list[str]]:
    values, errors = {}, []
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            if output.output_type == "stream" and "TFM-CLAIMS " in output.text:
                for line in output.text.splitlines():
                    if line.startswith("TFM-CLAIMS "):
                        values.update(json.loads(line.removeprefix("TFM-CLAIMS ")))
            elif output.output_type == "error":
                errors.append(f"{output.ename}: {output.evalue}"[:200])
    return values, errors


def worker(paths: list[Path], seeds: int, path_name: str) -> None:
    """Run in a process whose environment already holds the numeric path: print one JSON line per run."""
    for nb_path in paths:
        nb = nbformat.read(nb_path, as_version=4)
        if not claims_of(nb):
            continue
        for seed in range(seeds):
            os.environ["TFM_SEED_OFFSET"] = str(seed)
            run = probed(nb)
            with tempfile.TemporaryDirectory() as folder:
                seconds = execute(run, Path(folder), allow_errors=True)
            values, errors = read_probes(run)
            record = {"chapter": nb_path.stem, "path": path_name, "seed": seed, "values": values, "errors": errors,
                      "seconds": round(seconds, 1)}
            print("RUN " + json.dumps(record), flush=True)


def holds(claim: dict, value: float | None) -> bool:
    if value is None:
        return False
    return (("at_least" not in claim or value >= claim["at_least"])
            and ("at_most" not in claim or value <= claim["at_most"]))


def fmt(value: float | None, spec: str) -> str:
    """A claim's value as its format says; the probes read every value as a float, so an integer format rounds."""
    if value is None:
        return "–"
    return format(round(value) if spec.endswith("d") else value, spec)


def tabulate(runs: list[dict], paths: list[Path], seeds: int, path_names: list[str]) -> tuple[list[dict], str]:
    rows, lines = [], []
    for nb_path in paths:
        nb = nbformat.read(nb_path, as_version=4)
        for _, claim in claims_of(nb):
            mine = [r for r in runs if r["chapter"] == nb_path.stem]
            values = [r["values"].get(claim["name"]) for r in mine]
            seen = [v for v in values if v is not None]
            spec = claim.get("format", ".3g")
            if "at_least" not in claim and "at_most" not in claim:  # recorded, not asserted: it varies
                bound = "not asserted"
            elif spec == "yes":  # a yes/no claim, recorded as 1 or 0
                bound = "yes" if "at_least" in claim else "no"
            else:
                bound = (f"≥ {format(claim['at_least'], spec)}" if "at_least" in claim else
                         f"≤ {format(claim['at_most'], spec)}")
            # The numeric paths of one seed that gave the same values for all of the chapter's claims are one result,
            # not several: on a CPU where the paths change no bit of a chapter, 5 seeds x 3 paths are 5 distinct runs.
            distinct = len({(r["seed"], json.dumps(r["values"], sort_keys=True)) for r in mine})
            row = {"chapter": nb_path.stem, "claim": claim["name"], "bound": bound, "runs": len(values),
                   "distinct": distinct,
                   "min": min(seen) if seen else None, "max": max(seen) if seen else None,
                   "holds": len(values) == seeds * len(path_names) and all(holds(claim, v) for v in values),
                   "values": values}
            rows.append(row)
            if spec == "yes":
                spread = f"yes in {sum(v == 1 for v in values)} of {len(values)}"
            else:
                spread = f"{fmt(row['min'], spec)} – {fmt(row['max'], spec)}"
            lines.append(f"| {nb_path.stem[:2].lstrip('0')} | {claim['name']} | {bound} | {spread} | {row['runs']} | "
                         f"{distinct} | {'yes' if row['holds'] else '**no**'} |")
    header = ("| chapter | claim | asserted | range over all runs | runs | distinct runs | holds in every run |\n"
              "| ---: | --- | --- | --- | ---: | ---: | --- |")
    return rows, header + "\n" + "\n".join(lines)


def machine() -> str:
    try:
        model = next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                     if line.startswith("model name"))
    except (OSError, StopIteration):
        model = platform.processor() or platform.machine()
    import torch

    return f"{model}, {os.cpu_count()} CPUs, torch {torch.__version__}, Python {platform.python_version()}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--paths", nargs="+", default=list(PATHS), choices=list(PATHS))
    parser.add_argument("--chapters", nargs="*", default=[], help="chapter numbers (default: all)")
    parser.add_argument("--out", type=Path, default=ROOT / "appendices" / "robustness")
    parser.add_argument("--merge", nargs="+", type=Path, help="combine the runs of partial sweeps (their .json files)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    paths = [p for p in notebooks() if not args.chapters or p.stem[:2] in {c.zfill(2) for c in args.chapters}]
    if args.chapters and args.out == parser.get_default("out"):  # a partial sweep never replaces the book's table
        args.out = Path(tempfile.gettempdir()) / f"robustness-{'-'.join(p.stem[:2] for p in paths)}"
    if args.worker:
        worker(paths, args.seeds, args.worker)
        return 0
    if args.merge:
        runs, stamps = merged_runs(args.merge, args)
        return write_table(runs, paths, args, stamps)
    runs = []
    started = datetime.datetime.now(datetime.timezone.utc)
    for name in args.paths:
        # one thread per kernel unless told otherwise: two sweeps side by side with the default count ran 7-10 times
        # slower each (threads oversubscribed), and the count changes the bits of some chapters' training
        env = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", **os.environ, **PATHS[name]}
        command = [sys.executable, "-m", "tools.book.robustness", "--worker", name, "--seeds", str(args.seeds),
                   "--chapters", *[p.stem[:2] for p in paths]]
        with subprocess.Popen(command, env=env, stdout=subprocess.PIPE, text=True, cwd=ROOT) as process:
            for line in process.stdout:
                if line.startswith("RUN "):
                    record = json.loads(line[4:])
                    runs.append(record)
                    print(f"{record['path']:>14} seed {record['seed']} {record['chapter']}: {record['values']} "
                          f"{'ERRORS ' + str(record['errors']) if record['errors'] else ''} ({record['seconds']} s)",
                          flush=True)
        if process.returncode:
            raise SystemExit(f"the {name} worker failed with exit code {process.returncode}")
    return write_table(runs, paths, args, f"Run on {started:%Y-%m-%d} on {machine()}")


def merged_runs(files: list[Path], args: argparse.Namespace) -> tuple[list[dict], str]:
    """The runs of several sweeps, and their stamps. A later file replaces the runs of every chapter it holds, so
    `--merge appendices/robustness.json /tmp/robustness-06.json` updates chapter 6 and keeps the rest."""
    runs, stamps = [], []
    for f in files:
        data = json.loads(f.read_text())
        if data["seeds"] != args.seeds or data["paths"] != args.paths:
            raise SystemExit(f"{f} was run with {data['seeds']} seeds and paths {data['paths']}, not "
                             f"{args.seeds} and {args.paths}")
        when = data["stamp"].split(":")[0]
        fresh = [{**r, "when": r.get("when", when)} for r in data["runs"]]  # each run keeps the date of its sweep
        chapters = {r["chapter"] for r in fresh}
        runs = [r for r in runs if r["chapter"] not in chapters] + fresh
    for when in dict.fromkeys(r["when"] for r in runs):
        chapter_list = ", ".join(sorted({r["chapter"][:2].lstrip("0") for r in runs if r["when"] == when}, key=int))
        stamps.append(f"{when} (chapters {chapter_list})")
    return runs, "; ".join(stamps)


def write_table(runs: list[dict], paths: list[Path], args: argparse.Namespace, when: str) -> int:
    rows, table = tabulate(runs, paths, args.seeds, args.paths)
    stamp = f"{when}: {args.seeds} seeds × {len(args.paths)} numeric paths ({', '.join(args.paths)})."
    args.out.with_suffix(".json").write_text(json.dumps({"stamp": stamp, "seeds": args.seeds, "paths": args.paths,
                                                         "claims": rows, "runs": runs}, indent=1) + "\n")
    args.out.with_suffix(".md").write_text(f"{stamp}\n\n{table}\n")
    print(f"\n{stamp}\n\n{table}")
    return 0 if all(row["holds"] for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
