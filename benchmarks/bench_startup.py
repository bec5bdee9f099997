"""Start-up time of the `perfcast` command (issue 22: `--help` <= 0.3 s, `infer` <= 0.8 s). Run:
`python benchmarks/bench_startup.py [--runs 15] [--baseline SRC] [--only TEXT]` (not part of
`pytest`).

Every command runs in a fresh process of the installed entry point (`perfcast` beside this
Python, as pip wrote it; a pyenv shim in front of it adds ~50 ms of bash) with a warm file
cache (one unmeasured run first); the median wall time of `--runs` is printed. With
`--baseline SRC`, another checkout's `src/` (e.g. `git archive HEAD src | tar -x -C /tmp/head`)
runs through the same entry point (on PYTHONPATH) and the ratio baseline / this tree is printed.
Then the ten modules with the largest cumulative import time of `perfcast infer`
(`python -X importtime`, one run: indicative, not a median).

Measured 2026-11-27 on the shared 2-core machine (load average ~2), median of 9 runs taking
turns; before = the tree whose `perfcast.api` imported every command module, after = lazy
packages (`--baseline` = a copy of the tree before):

    command                                 before     after    ratio
    perfcast --help                         0.162 s   0.164 s    1.0x
    perfcast --version                      0.087 s   0.087 s    1.0x
    perfcast infer --help                   1.480 s   0.729 s    2.0x
    perfcast infer (llama-2-7b, h100-sxm)   1.986 s   1.561 s    1.3x
    perfcast serve (10 requests, arxiv)     1.746 s   1.518 s    1.1x

Before, `from perfcast.api import InferRequest` imported every command (calibration, training,
accelerators, measurement) and scipy.optimize (~0.8 s). Now perfcast.api, comm, compose,
kernels, ops, specs and train load a name on first use and scipy.optimize loads inside the
fits.

Measured 2026-11-27 later (load average ~1.1, median of 9; baseline = the tree above, `git
archive 7aff4e3`; this tree prices an inference's 17 sampled decode steps in one kernel-model
call, not one each, and the kernel model prepares a table's rows in one pass):

    command                                 before     after    ratio
    perfcast --help                         0.172 s   0.151 s    1.1x
    perfcast infer --help                   0.698 s   0.691 s    1.0x
    perfcast infer (llama-2-7b, h100-sxm)   1.517 s   1.121 s    1.4x
    perfcast serve (10 requests, arxiv)     1.457 s   1.354 s    1.1x

(0.94-0.97 s for infer at load ~0.6.) Left in `perfcast infer` (~1 s): Python and typer
~0.11 s, `perfcast.api` ~0.34 s (pandas ~0.2 s: op tables are DataFrames), the shipped
calibration JSON ~0.10 s, scipy.spatial ~0.17 s (the cKDTree of the target-measured residuals:
its tie-breaking among equidistant shapes is part of the shipped numbers, so a numpy search
would move them) and the forecast ~0.13 s.

Measured 2026-11-28 on a slower 2-core machine (`python -c pass` 0.08 s; load average ~1-2,
median of 9; baseline = `git archive e04c8c3 src`). The shipped calibrations are read through
their compact copy (kernels._json_cache; the unmeasured first run writes it), and the
target-measured residuals' nearest shapes are searched without scipy.spatial for a forecast's
batches (ties now broken by sample index, the same with or without the KD-tree):

    command                                 before     after    ratio
    perfcast --help                         0.458 s   0.436 s    1.1x
    perfcast --version                      0.279 s   0.268 s    1.0x
    perfcast infer --help                   1.934 s   1.825 s    1.1x
    perfcast infer (llama-2-7b, h100-sxm)   2.875 s   2.058 s    1.4x
    perfcast serve (10 requests, arxiv)     4.295 s   3.456 s    1.2x

Later (load ~1.5), with `perfcast.api._choices` / `_infer` importing the pricing layers only
when a request resolves or runs (so `infer --help` loads no pandas):

    command                                 before     after    ratio
    perfcast --help                         0.489 s   0.511 s    1.0x
    perfcast infer --help                   1.892 s   1.134 s    1.7x
    perfcast infer (llama-2-7b, h100-sxm)   3.366 s   2.395 s    1.4x
    perfcast serve (10 requests, arxiv)     4.319 s   3.313 s    1.3x

Idle (load ~0.1), `infer` 5 times each: 2.00 s median with the copy, 2.58 s with it turned
off (`PERFCAST_CACHE_DIR=`), 3.09 s on a first run that writes it.

Measured 2026-11-28 later (load ~1, median of 5; baseline = `git archive 4ae2bdc src`), with
`perfcast.serve` exporting lazily and `api._serve` loading pandas and the simulator only to
run (`serve --help`), and a MoE model's token grid priced from one op table for all its
points:

    command                                 before     after    ratio
    perfcast --help                         0.488 s   0.467 s    1.0x
    perfcast infer --help                   1.233 s   1.180 s    1.0x
    perfcast infer (llama-2-7b, h100-sxm)   1.984 s   2.113 s    0.9x (unchanged code: noise)
    perfcast serve (10 requests, arxiv)     3.554 s   3.512 s    1.0x
    perfcast serve --help                   1.959 s   1.264 s    1.6x
    perfcast serve (deepseek-v3, 200 req)   4.534 s   3.229 s    1.4x

Measured 2026-11-28 later (load ~1-2, median of 5; baseline = `git archive 01332ce src`), with
every command's `--help` drawn from its options alone (`perfcast.measure`, `.sweep` and
`.validate` exporting lazily; the request modules of step, train, measure, calibrate, cpu,
selfcheck, diffusion and rag, and the sweep/capacity/validate/measure commands, importing the
pricing, simulation, measurement and check layers where a request runs):

    command                                 before     after    ratio
    perfcast --help                         0.450 s   0.449 s    1.0x
    perfcast step --help                    2.182 s   1.177 s    1.9x
    perfcast train --help                   3.000 s   1.171 s    2.6x
    perfcast capacity --help                3.549 s   0.696 s    5.1x
    perfcast validate --help                3.406 s   0.742 s    4.6x
    perfcast measure --help                 1.931 s   1.037 s    1.9x

(`infer --help` 1.106 / 1.084 s and `serve --help`: unchanged code, the same modules.)

Measured 2026-11-28 later (load ~2, median of 9; baseline = `git archive 6e2e868 src`), with
`perfcast --help` written from typer's last rendering for the same terminal and environment
(cli._help_cache: no typer or rich imported; the unmeasured first run stores it):

    command                                 before     after    ratio
    perfcast --help                         0.322 s   0.081 s    4.0x
    perfcast --version                      0.209 s   0.201 s    1.0x

The first run after an install or a calibration change parses the JSON and writes the copy
(~0.7 s more, once). Left in `infer`: pandas ~0.57 s to import (op tables are DataFrames),
numpy ~0.12 s, the copy's tables rebuilt as dicts and the residual grids' cells packed ~0.2 s,
pricing and printing the forecast.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

INFER = "perfcast infer (llama-2-7b, h100-sxm)"
SERVE = "perfcast serve (10 requests, arxiv)"
TARGETS_S = {"perfcast --help": 0.3, INFER: 0.8}  # whole process, median wall seconds
COMMANDS = {
    "perfcast --help": ["--help"],
    "perfcast --version": ["--version"],
    "perfcast infer --help": ["infer", "--help"],
    INFER: ["infer", "--model", "llama-2-7b", "--gpu", "h100-sxm"],
    SERVE: ["serve", "--gpu", "a100-sxm4-80gb", "--qps", "1.5", "--num-requests", "10",
            "--lengths", "trace", "--trace", "arxiv", "--json"],
    "perfcast serve --help": ["serve", "--help"],
    # every command's --help is drawn from its options, without the layers that run it
    "perfcast step --help": ["step", "--help"],
    "perfcast train --help": ["train", "--help"],
    "perfcast capacity --help": ["capacity", "--help"],
    "perfcast validate --help": ["validate", "--help"],
    "perfcast measure --help": ["measure", "--help"],
    # a MoE deployment prices its token grid point by point (routing is not linear in tokens)
    "perfcast serve (deepseek-v3, 200 req)": [
        "serve", "--model", "deepseek-v3", "--gpu", "b200-sxm", "--tp", "8", "--ep", "8",
        "--weight-dtype", "fp8", "--qps", "4", "--num-requests", "200", "--json"],
}
IMPORT_PROFILE = INFER
TOP_IMPORTS = 10


def entry_point() -> Path:
    """The `perfcast` script pip installed beside this interpreter."""
    path = Path(sys.executable).with_name("perfcast")
    if not path.is_file():
        raise SystemExit(f"no perfcast entry point at {path}: pip install -e . first")
    return path


def environment(src: Path | None) -> dict[str, str]:
    """The environment of a measured run: this one, with `src` first on the import path."""
    env = dict(os.environ, COLUMNS="100")
    if src is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(src), *filter(None, [env.get("PYTHONPATH")])])
    return env


def walls_s(args: list[str], envs: list[dict[str, str]], runs: int) -> list[float]:
    """Median wall seconds of `perfcast *args` in a fresh process per environment, after one
    unmeasured run each; the environments take turns, so a change in the machine's load
    falls on all of them alike."""
    command = [str(entry_point()), *args]
    for env in envs:
        first = subprocess.run(command, env=env, capture_output=True, text=True)
        if first.returncode != 0:
            raise SystemExit(f"{' '.join(command)} failed:\n{first.stderr}")
    times: list[list[float]] = [[] for _ in envs]
    for _ in range(runs):
        for env, own in zip(envs, times, strict=True):
            start = time.perf_counter()
            subprocess.run(command, env=env, check=True, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
            own.append(time.perf_counter() - start)
    return [statistics.median(own) for own in times]


def slowest_imports(args: list[str], env: dict[str, str]) -> list[tuple[float, str]]:
    """(cumulative ms, module) of the TOP_IMPORTS slowest imports of `perfcast *args`."""
    done = subprocess.run([sys.executable, "-X", "importtime", str(entry_point()), *args],
                          env=env, check=True, capture_output=True, text=True)
    rows = []
    for line in done.stderr.splitlines():
        fields = line.removeprefix("import time:").split("|")
        if line.startswith("import time:") and fields[1].strip().isdigit():
            rows.append((int(fields[1]) / 1000, fields[2].strip()))
    return sorted(rows, reverse=True)[:TOP_IMPORTS]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=11)
    parser.add_argument("--baseline", type=Path, help="another checkout's src/ to compare")
    parser.add_argument("--only", default="", help="the commands whose label contains this")
    args = parser.parse_args()
    trees = {"this tree": environment(None)}
    if args.baseline is not None:
        trees = {"baseline": environment(args.baseline.resolve()), **trees}
    print(f"median wall time of {args.runs} fresh processes, {os.cpu_count()} CPUs")
    print(f"{'command':40s}" + "".join(f"{name:>12s}" for name in trees)
          + ("       ratio" if len(trees) == 2 else ""))
    verdicts = []
    for label, command in COMMANDS.items():
        if args.only not in label:
            continue
        walls = walls_s(command, list(trees.values()), args.runs)
        ratio = f"{walls[0] / walls[1]:11.1f}x" if len(walls) == 2 else ""
        print(f"{label:40s}" + "".join(f"{w:11.3f}s" for w in walls) + ratio)
        if label in TARGETS_S:
            verdict = "meets" if walls[-1] <= TARGETS_S[label] else "BELOW target"
            verdicts.append(f"  {label:40s} <= {TARGETS_S[label]:.1f} s: {verdict} "
                            f"({walls[-1]:.3f} s, this tree)")
    for name, env in trees.items():
        print(f"\n{name}: {TOP_IMPORTS} slowest imports (cumulative) of {IMPORT_PROFILE}")
        for cumulative_ms, module in slowest_imports(COMMANDS[IMPORT_PROFILE], env):
            print(f"  {cumulative_ms:8.1f} ms  {module}")
    print("\ntargets (median wall time, whole process):")
    print("\n".join(verdicts))


if __name__ == "__main__":
    main()
