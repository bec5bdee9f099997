"""Fit the llm-foundry training-stack profile (src/perfcast/train/data/stack_llm_foundry.json)
on MosaicML's measured grid (validate/data/training_points.json, from
../shared/data/training) with the current training engine and kernel model.

Run from the repository root: `python scripts/fit_training_stack.py` writes the profile
(schema 2: other, attention and overlap_loss fitted on every point at once, the held-out
MAPE of each scheme beside them). `--check` only compares a fresh fit with the shipped file
and exits 1 when they differ by more than 2e-3. Deterministic: no sampling.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from perfcast.train import default_time_model
from perfcast.validate._training import load_training_points
from perfcast.validate._training_calibration import calibration_document, kernel_split

PROFILE = Path("src/perfcast/train/data/stack_llm_foundry.json")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare, do not write")
    args = parser.parse_args()
    doc = calibration_document(kernel_split(load_training_points(), default_time_model()))
    if args.check:
        shipped = json.loads(PROFILE.read_text())["factors"]
        far = {k: (shipped.get(k), v) for k, v in doc["factors"].items()
               if isinstance(v, float) and abs(shipped.get(k, 0.0) - v) > 2e-3}
        print("shipped profile matches a fresh fit" if not far else f"differs: {far}")
        return 1 if far else 0
    PROFILE.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"wrote {PROFILE}: {doc['factors']} held out {doc['heldout_tokens_per_s_mape']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
