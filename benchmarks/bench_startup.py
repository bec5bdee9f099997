"""Start-up time of the `perfcast` command (issue: `perfcast --help` under 0.3 s). Run:
`python benchmarks/bench_startup.py [--runs 15] [--baseline SRC]` (not part of `pytest`).

Every command runs in a fresh process of the installed entry point (`perfcast` beside this
Python, as pip wrote it; a pyenv shim in front of it adds ~50 ms of bash) with a warm file
cache (one unmeasured run first); the median wall time of `--runs` is printed. With
`--baseline SRC`, another checkout's `src/` (e.g. `git archive HEAD src | tar -x -C /tmp/head`)
runs through the same entry point (on PYTHONPATH) and the ratio baseline / this tree is printed.
Then the ten modules with the largest cumulative import time of `perfcast infer`
(`python -X importtime`, one run: indicative, not a median).

Measured 2026-11-26 on the shared 2-core machine (load average ~2.3), median of 15 runs
taking turns, `--baseline` = git HEAD aa14387 (`git archive`), this tree = lazy commands:

    command                                 HEAD (eager)   lazy    ratio
    perfcast --help                            1.185 s     0.133 s   8.9x
    perfcast --version                         1.145 s     0.080 s  14.2x
    perfcast infer --help                      1.229 s     1.202 s   1.0x
    perfcast infer (llama-2-7b, h100-sxm)      2.083 s     1.929 s   1.1x

Under a load average of ~6 (other jobs' tests) `--help` took 0.256 s against HEAD's 2.19 s.
At HEAD `import perfcast.cli` imported every command module, and `cli._common` imports
perfcast.api (pandas; scipy.optimize via kernels._fit: ~0.95 s of HEAD's 1.07 s import of
perfcast.cli); now it imports typer, rich and three small modules (~45 ms). `perfcast infer`
still pays for perfcast.api, which it uses (top of the import profile: perfcast.api 1.0 s,
api._calibrate 0.78 s, kernels._fit 0.44 s, scipy.optimize 0.38 s, pandas 0.23 s).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

TARGET_HELP_S = 0.3  # `perfcast --help`, whole process
COMMANDS = {
    "perfcast --help": ["--help"],
    "perfcast --version": ["--version"],
    "perfcast infer --help": ["infer", "--help"],
    "perfcast infer (llama-2-7b, h100-sxm)": ["infer", "--model", "llama-2-7b",
                                              "--gpu", "h100-sxm"],
}
IMPORT_PROFILE = "perfcast infer (llama-2-7b, h100-sxm)"
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
    args = parser.parse_args()
    trees = {"this tree": environment(None)}
    if args.baseline is not None:
        trees = {"baseline": environment(args.baseline.resolve()), **trees}
    print(f"median wall time of {args.runs} fresh processes, {os.cpu_count()} CPUs")
    print(f"{'command':40s}" + "".join(f"{name:>12s}" for name in trees)
          + ("       ratio" if len(trees) == 2 else ""))
    for label, command in COMMANDS.items():
        walls = walls_s(command, list(trees.values()), args.runs)
        ratio = f"{walls[0] / walls[1]:11.1f}x" if len(walls) == 2 else ""
        print(f"{label:40s}" + "".join(f"{w:11.3f}s" for w in walls) + ratio)
    for name, env in trees.items():
        print(f"\n{name}: {TOP_IMPORTS} slowest imports (cumulative) of {IMPORT_PROFILE}")
        for cumulative_ms, module in slowest_imports(COMMANDS[IMPORT_PROFILE], env):
            print(f"  {cumulative_ms:8.1f} ms  {module}")
    print(f"\ntarget: perfcast --help <= {TARGET_HELP_S} s")


if __name__ == "__main__":
    main()
