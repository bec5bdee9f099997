"""The linear_attn family (Gated DeltaNet scan and decode state step): fitted from
AIConfigurator's measured GDN kernels, checked on devices held out of the fit and against the
plain roofline, on the shipped sample (perfcast/validate/data/aic_gdn_slice.csv)."""

from importlib import resources

import numpy as np
import pandas as pd
import pytest

from perfcast.kernels import (
    PhysicsModel,
    RooflineModel,
    fit_calibration,
    shipped_calibration,
    source_time_model,
)
from perfcast.kernels._linear_attn import gdn_op_rows, gdn_store_rows
from perfcast.ops import COLUMNS
from perfcast.specs import get_device

HELD_OUT = ("h100-sxm", "b200-sxm")  # one Hopper, one Blackwell part
# L40S / RTX PRO 6000 state steps run faster than their HBM roofline (the benchmark's state
# stays in their 96/128 MB L2); a forecast never beats the roofline, so they are not scored.
L2_RESIDENT = ("l40s", "rtx-pro-6000")


@pytest.fixture(scope="module")
def sample() -> pd.DataFrame:
    path = resources.files("perfcast.validate") / "data" / "aic_gdn_slice.csv"
    with path.open() as fh:
        table = pd.read_csv(fh)
    table = table.assign(source="aiconfigurator-" + table["stack"])
    return pd.concat([table, gdn_op_rows(table)], axis=1)


def _errors(model, rows: pd.DataFrame) -> pd.DataFrame:
    """Per device x op: MAPE (mean |forecast / measured - 1|) and mean |log(forecast /
    measured)| (which, unlike MAPE, also grows when a forecast is 100x too fast)."""
    pred = np.zeros(len(rows))
    for device, idx in rows.groupby("device").indices.items():
        ops = rows.iloc[idx].assign(layer="gdn", phase="bench", count=1)[COLUMNS]
        pred[idx] = model.kernel_times(ops.reset_index(drop=True), get_device(device))
    ratio = pred / rows["latency_s"].to_numpy()
    err = pd.DataFrame({"ape": np.abs(ratio - 1.0), "alog": np.abs(np.log(ratio))},
                       index=rows.index)
    return err.groupby([rows["device"], rows["op"]]).mean()


def test_sample_rows_are_the_forecast_rows(sample):
    scans = sample[sample["kernel_source"].str.startswith("chunk")]
    steps = sample[sample["kernel_source"].str.startswith("fused_recurrent")]
    assert set(scans["op"]) == {"scan_prefill"} and set(steps["op"]) == {"state_decode"}
    assert set(scans["dtype"]) == {"bf16"} and set(steps["dtype"]) == {"fp32"}
    for source in ("default", "vllm", "sglang"):
        fixed = shipped_calibration(source).families["linear_attn"].fixed_s
        assert {"scan_prefill/bf16", "state_decode/fp32"} <= set(fixed)


# stack -> (held-out scan MAPE, held-out scan mean |log error|) ceilings; measured on the
# sample: vLLM 0.62/0.49 (H100), SGLang 0.41/0.37 (H100). vLLM's flashinfer scan is 8x slower
# for one 32k-token sequence than for eight 4k ones, which the one-row-per-step scan (tokens
# only, no sequence count) cannot tell apart.
HELD_OUT_SCAN = {"vllm": (0.75, 0.6), "sglang": (0.5, 0.45)}


@pytest.mark.parametrize("stack", sorted(HELD_OUT_SCAN))
def test_held_out_devices_beat_the_roofline(sample, stack):
    """Fit on every other device of the stack's tables, score the held-out one."""
    rows = sample[(sample["stack"] == stack) & (sample["family"] == "linear_attn")]
    rows = rows.reset_index(drop=True)
    store = gdn_store_rows(rows)
    ape_max, alog_max = HELD_OUT_SCAN[stack]
    for device in HELD_OUT:
        cal = fit_calibration(store[store["device"] != device])
        test = rows[rows["device"] == device].reset_index(drop=True)
        fitted, roof = _errors(PhysicsModel(cal), test), _errors(RooflineModel(), test)
        scan, step = (device, "scan_prefill"), (device, "state_decode")
        assert fitted.loc[scan, "ape"] < ape_max
        assert fitted.loc[scan, "alog"] < alog_max
        assert fitted.loc[scan, "alog"] < 0.25 * roof.loc[scan, "alog"]
        assert fitted.loc[step, "ape"] < 0.35


@pytest.mark.parametrize(("source", "stack", "scan_max"),
                         [("vllm", "vllm", 0.65), ("sglang", "sglang", 0.32),
                          ("default", "sglang", 0.32)])
def test_shipped_fit_on_measured_devices(sample, source, stack, scan_max):
    """The shipped calibrations on their own measured devices (target-measured tier)."""
    rows = sample[(sample["stack"] == stack) & (sample["family"] == "linear_attn")]
    ape = _errors(source_time_model(source), rows.reset_index(drop=True))["ape"]
    scans = ape.xs("scan_prefill", level="op")
    steps = ape.xs("state_decode", level="op").drop(list(L2_RESIDENT))
    assert scans.max() < scan_max
    assert steps.max() < 0.06
