"""Derive the shipped measured layer points (src/perfcast/validate/data/serving_step_points.csv)
from the raw Vidur (vidur-profiling/profiling/compute/<gpu>/<model>/mlp.csv) and
AIConfigurator (aiconfigurator/systems/data/<system>/{attention,gemm}/) folders.

    python scripts/build_serving_step_points.py [--shared ../shared/data] [--points 64]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from perfcast.validate._serving_step import layer_points_from_shared

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default=str(REPO.parent / "shared" / "data"))
    ap.add_argument("--points", type=int, default=64)
    args = ap.parse_args()
    points = layer_points_from_shared(args.shared, args.points)
    out = REPO / "src" / "perfcast" / "validate" / "data" / "serving_step_points.csv"
    points.to_csv(out, index=False, float_format="%.9g")
    print(f"wrote {out}: {len(points)} points")


if __name__ == "__main__":
    main()
