"""Fit each serving engine's host cost per kernel of a prefill step (Stack.host.prefill_dispatch_s).

Run from the repository root: `python scripts/fit_prefill_dispatch.py [--held-out]`.

The engines replay CUDA graphs for decode-only steps only; a step with prefill tokens may
run kernel by kernel (SGLang's extend batches in the builds these rows ran), so a short
prompt's step can wait on its host (`perfcast.compose.ServingStepModel`: max(busy + d,
N·d)). No kernel table measures d:
it shows only in end-to-end TTFT. For each backend of `silicon_sample_dev.csv`
(trtllm, vllm, sglang) this replays the diagnostic sample (`--points-per-group` 3 per
model x device x backend x precision, seed 0: the points the serving choices were made on)
through the closed-loop replay of `perfcast validate serving` (`engine_point`) at every
candidate d, and keeps the smallest d whose median APE of TTFT (the target's own metric,
on the quantity d moves most; TPOT is reported beside it) is within TOLERANCE of the
lowest: no host cost unless the points ask for one. `--held-out` then replays the backend's
other points at 0 and at the fitted d, so the gain is reported on points the fit never saw.

Writes the fitted d into src/perfcast/specs/data/stacks.json (each backend stack's host,
with its provenance) and docs/validation/prefill_dispatch.{md,csv}; `--check` fails if the
shipped values differ from a new fit.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from perfcast.validate._serving import load_serving_points, sample_serving_points
from perfcast.validate._serving_sim import engine_point

ROOT = Path(__file__).resolve().parents[1]
STACKS_JSON = ROOT / "src/perfcast/specs/data/stacks.json"
REPORT = ROOT / "docs/validation/prefill_dispatch"
BACKENDS = ("trtllm", "vllm", "sglang")
CANDIDATES_US = (0, 25, 50, 75, 100, 125, 150, 175, 200, 250, 300)
TOLERANCE = 0.005  # of median APE: a smaller d as good as the best within it is kept
PROVENANCE = (". Prefill steps (decode-only ones replay CUDA graphs): {d:g} us of host per "
              "kernel of perfcast's serving op table, fitted on the closed-loop TTFT/TPOT of "
              "AIConfigurator's silicon_sample_dev.csv diagnostic sample ({n} {backend} "
              "points; scripts/fit_prefill_dispatch.py, docs/validation/prefill_dispatch.md).")


def replay(points: pd.DataFrame, d_us: float) -> pd.DataFrame:
    """Per point: TTFT and TPOT APE with prefill dispatch `d_us` microseconds."""
    rows = []
    for _, p in points.iterrows():
        ttft, tpot = engine_point(p, stack="backend", prefill_dispatch_s=d_us / 1e6)
        rows.append({"point_id": p["point_id"], "d_us": d_us,
                     "ttft_ape": abs(ttft / p["ttft_s"] - 1),
                     "tpot_ape": abs(tpot / p["tpot_s"] - 1)})
    return pd.DataFrame(rows)


def score(res: pd.DataFrame) -> pd.DataFrame:
    """Median APE of TTFT (the objective) and TPOT per candidate."""
    out = res.groupby("d_us")[["ttft_ape", "tpot_ape"]].median()
    return out.assign(n=res.groupby("d_us").size())


def fit_backend(points: pd.DataFrame, sample: pd.DataFrame, backend: str, held_out: bool
                ) -> tuple[float, list[dict]]:
    """(fitted d in seconds, report rows) for one backend."""
    fit_pts = sample[sample["backend"] == backend]
    table = score(pd.concat([replay(fit_pts, d) for d in CANDIDATES_US]))
    ttft = table["ttft_ape"]
    best = float(ttft.index[ttft <= ttft.min() + TOLERANCE].min())
    rows = [{"backend": backend, "points": "fit sample", "d_us": d, **r._asdict()}
            for d, r in zip(table.index, table[["ttft_ape", "tpot_ape", "n"]]
                            .itertuples(index=False), strict=True)]
    if held_out:
        rest = points[(points["backend"] == backend)
                      & ~points["point_id"].isin(fit_pts["point_id"])]
        done = score(pd.concat([replay(rest, d) for d in sorted({0.0, best})]))
        rows += [{"backend": backend, "points": "held out", "d_us": d, **r._asdict()}
                 for d, r in zip(done.index, done[["ttft_ape", "tpot_ape", "n"]]
                                 .itertuples(index=False), strict=True)]
    print(f"{backend}: d = {best:g} us", file=sys.stderr, flush=True)
    return best / 1e6, rows


def write(fitted: dict[str, float], counts: dict[str, int], rows: list[dict]) -> None:
    stacks = json.loads(STACKS_JSON.read_text())
    for entry in stacks["stacks"]:
        if entry["name"] in fitted:
            host = entry["host"]
            base = host["provenance"].split(PROVENANCE[:16])[0].rstrip(".")
            d = fitted[entry["name"]]
            host["prefill_dispatch_s"] = d
            host["provenance"] = base + PROVENANCE.format(d=d * 1e6, n=counts[entry["name"]],
                                                          backend=entry["name"])
    STACKS_JSON.write_text(json.dumps(stacks, indent=1, ensure_ascii=False) + "\n")
    table = pd.DataFrame(rows)
    table.to_csv(REPORT.with_suffix(".csv"), index=False, float_format="%.4f")
    lines = ["# Prefill dispatch per serving engine (scripts/fit_prefill_dispatch.py)", "",
             "Median APE of closed-loop TTFT and TPOT per candidate host cost per kernel of a "
             "prefill step (d, us), on the diagnostic sample the fit chose from and, with "
             "--held-out, on the backend's other points at 0 and at the fitted d.", "",
             "| backend | points | d_us | ttft median APE | tpot median APE | n |",
             "|---|---|---|---|---|---|"]
    lines += [f"| {r['backend']} | {r['points']} | {r['d_us']:g} | {r['ttft_ape']:.3f} | "
              f"{r['tpot_ape']:.3f} | {r['n']} |" for r in rows]
    lines += ["", "Fitted: " + ", ".join(f"{b} {d * 1e6:g} us" for b, d in fitted.items())]
    REPORT.with_suffix(".md").write_text("\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--points-per-group", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--held-out", action="store_true",
                        help="also replay every other point at 0 and at the fitted d")
    parser.add_argument("--check", action="store_true",
                        help="fail if the shipped values differ from this fit")
    args = parser.parse_args()
    points = load_serving_points()
    sample = sample_serving_points(points, args.points_per_group, args.seed)
    fitted, rows, counts = {}, [], {}
    for backend in BACKENDS:
        fitted[backend], part = fit_backend(points, sample, backend, args.held_out)
        counts[backend] = int((sample["backend"] == backend).sum())
        rows += part
    if args.check:
        shipped = {s["name"]: s["host"].get("prefill_dispatch_s", 0.0)
                   for s in json.loads(STACKS_JSON.read_text())["stacks"]}
        stale = [b for b in BACKENDS if not np.isclose(shipped[b], fitted[b])]
        if stale:
            sys.exit(f"stale prefill_dispatch_s: {stale}; run scripts/fit_prefill_dispatch.py")
        print("prefill dispatch up to date")
        return
    write(fitted, counts, rows)


if __name__ == "__main__":
    main()
