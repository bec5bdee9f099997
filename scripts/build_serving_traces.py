"""Derive the shipped request-length traces (src/perfcast/serve/data/*.parquet) from Vidur's
processed traces (shared/data/vidur-profiling/processed_traces/).

Each output keeps every row, in the file's order, with perfcast's column names:
`prompt_tokens`, `output_tokens` (int32) and, where the source has `arrived_at`, `arrival_s`
(float64, unchanged). arXiv's derived `num_total_tokens` and `pd_ratio` are dropped (they
follow from the two lengths). Parquet (zstd) because the package ships *.parquet and the
arrival column stays bit-exact.

    python scripts/build_serving_traces.py [--shared ../shared/data]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "src" / "perfcast" / "serve" / "data"
SOURCES = {  # shipped name -> source file under vidur-profiling/processed_traces/
    "arxiv": "arxiv_summarization_stats_llama2_tokenizer_filtered_v2.csv",
    "splitwise-conv": "splitwise_conv.csv",
    "splitwise-code": "splitwise_code.csv",
}


def derive(src: Path) -> pd.DataFrame:
    """The shipped columns of one processed trace, checked."""
    raw = pd.read_csv(src)
    out = pd.DataFrame({"prompt_tokens": raw["num_prefill_tokens"].astype("int32"),
                        "output_tokens": raw["num_decode_tokens"].astype("int32")})
    if "arrived_at" in raw:
        out["arrival_s"] = raw["arrived_at"].astype("float64")
        assert out["arrival_s"].is_monotonic_increasing, src
    assert (out[["prompt_tokens", "output_tokens"]] >= 1).all().all(), src
    assert (out[["prompt_tokens", "output_tokens"]].to_numpy()
            == raw[["num_prefill_tokens", "num_decode_tokens"]].to_numpy()).all(), src
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default=str(REPO.parent / "shared" / "data"))
    args = ap.parse_args()
    folder = Path(args.shared) / "vidur-profiling" / "processed_traces"
    OUT.mkdir(parents=True, exist_ok=True)
    for name, file in SOURCES.items():
        df = derive(folder / file)
        path = OUT / f"{name}.parquet"
        df.to_parquet(path, index=False, compression="zstd")
        print(f"wrote {path.relative_to(REPO)}: {len(df)} rows, {path.stat().st_size} bytes")


if __name__ == "__main__":
    main()
