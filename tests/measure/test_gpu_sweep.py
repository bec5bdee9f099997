"""The kernel-case sweep: CUDA-graph and eager timings through a fake device double (no GPU
needed), the same cases on torch's CPU, the case plan and its budget, and pricing its rows."""

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfcast.errors import InputError
from perfcast.kernels import PhysicsModel, measurement_ops, shipped_calibration
from perfcast.measure import (
    STORE_COLUMNS,
    FakeDeviceBackend,
    KernelCase,
    SweepInterrupted,
    check_measurements,
    estimate_sweep_s,
    kernel_cases,
    local_cpu_device,
    measure_launch_s,
    run_gpu_sweep,
    run_torch_sweep,
    time_case,
)
from perfcast.measure._gpu import (
    MAX_COPIES,
    MAX_ROTATION_BYTES,
    ROTATION_L2_MULTIPLE,
    _collective_row,
    collective_sizes,
    launch_subset,
    rotation_copies,
)
from perfcast.measure._gpu_cases import KINDS, SHAPE_FIELDS, Kernel
from perfcast.ops import COMM_FAMILIES
from perfcast.specs import get_device

torch = pytest.importorskip("torch")

# One tiny shape per kind (SHAPE_FIELDS order).
TINY = {"linear": [(4, 32, 48), (16, 64, 32)], "bmm": [(2, 8, 16, 4)],
        "attn_prefill": [(1, 4, 2, 16, 8)], "attn_decode": [(2, 4, 1, 16, 32)],
        "rms_norm": [(8, 40)], "layer_norm": [(8, 40)], "silu_mul": [(8, 40)],
        "gelu": [(8, 40)], "softmax": [(8, 40)], "add": [(8, 40)], "embedding": [(5, 16, 64)],
        "rope": [(5, 4, 2, 16)], "conv": [(1, 3, 8, 4, 3, 1)]}
FORECAST_OPS = {"linear", "linear:scaled_mm", "bmm", "attn:sdpa_flash", "attn:sdpa_efficient",
                "ln", "ln:rms", "silu:mul", "gelu", "softmax", "add", "embedding", "rope",
                "conv"}
MODEL = PhysicsModel(shipped_calibration())


def _priced(rows: pd.DataFrame, device) -> np.ndarray:
    return MODEL.kernel_times(measurement_ops(rows), device, rows["timing"].to_numpy())


@pytest.fixture(scope="module")
def fake_rows():
    """The CUDA path on the fake double: every kind, the H100's dtypes; an L2 of one byte
    (one input copy) and 1 ms per timed run (past the replay target: one call a graph)."""
    fake = FakeDeviceBackend(l2_bytes=1.0, fixed_elapsed_s=1e-3)
    progress = []
    rows = run_gpu_sweep(repeats=2, shapes=TINY, backend=fake,
                         progress=lambda done, total: progress.append((done, total)))
    return rows, fake, progress


# ---------------------------------------------------------------- the CUDA path, faked


def test_fake_sweep_rows_are_in_the_store_schema(fake_rows):
    rows, fake, progress = fake_rows
    assert list(rows.columns) == list(STORE_COLUMNS)
    check_measurements(rows)
    assert set(rows["device"]) == {"h100-sxm"}  # torch's name resolved through the catalog
    assert set(rows["source"]) == {"local"} and rows["source_file"].str.contains("torch").all()
    assert set(rows["op"]) <= FORECAST_OPS
    assert {"fp8", "tf32", "bf16", "fp16", "fp32"} <= set(rows["dtype"])
    assert progress == [(i + 1, len(rows)) for i in range(len(rows))]
    graph = rows[rows["timing"] == "cuda_graph"]
    assert fake.captures == len(graph) and np.allclose(rows["latency_s"], 1e-3)


def test_the_launch_subset_is_timed_both_ways(fake_rows):
    rows = fake_rows[0]
    keys = ["family", "op", "dtype", "m", "n", "k", "b"]
    graph = rows[rows["timing"] == "cuda_graph"]
    eager = rows[rows["timing"] == "eager"]
    assert len(eager) and set(rows["timing"]) == {"cuda_graph", "eager"}
    # every eager row has its graph twin; every (op, dtype) has an eager row
    both = eager.merge(graph, on=keys, suffixes=("_eager", "_graph"))
    assert len(both) == len(eager)
    assert set(zip(eager["op"], eager["dtype"], strict=True)) == set(
        zip(graph["op"], graph["dtype"], strict=True))


def test_attention_rows_fill_the_attention_columns(fake_rows):
    rows = fake_rows[0]
    prefill = rows[rows["family"] == "attn_prefill"].iloc[0]
    # TINY prefill: batch 1, 4 heads, 2 KV heads, d 16, 8 tokens; causal pairs 8·9/2
    assert (prefill["b"], prefill["m"], prefill["n"], prefill["k"]) == (4, 8, 8, 16)
    assert (prefill["heads"], prefill["kv_heads"], prefill["q_len"]) == (4, 2, 8)
    assert prefill["flops"] == 2 * 4 * (16 + 16) * 36
    assert prefill["bytes"] == 2 * (2 * 8 * 4 * 16 + 8 * 2 * 2 * 16)
    decode = rows[rows["family"] == "attn_decode"].iloc[0]
    assert (decode["b"], decode["m"], decode["n"], decode["kv_len"]) == (8, 1, 32, 32)


def test_every_fake_row_can_be_priced(fake_rows):
    times = _priced(fake_rows[0], get_device("h100-sxm"))
    assert np.isfinite(times).all() and (times > 0).all()


def _counting_case(nbytes: int, seen: list) -> KernelCase:
    def build(device, gen):
        def call(t):
            seen.append(id(t[0]))

        return Kernel(lambda: (torch.empty(nbytes // 4, device=device),), call)

    coords = {"b": 1.0, "m": 1.0, "n": 1.0, "k": 0.0, "flops": 1.0, "bytes": float(nbytes),
              "kv_dtype": ""}
    return KernelCase("add", "add", "elementwise", "fp32", (1, 1), coords, build)


def test_graph_timing_rotates_copies_past_l2_and_divides_by_calls():
    seen: list[int] = []
    fake = FakeDeviceBackend(l2_bytes=2e6, fixed_elapsed_s=1e-3)
    timing = time_case(_counting_case(1_000_000, seen), fake, "cuda_graph", repeats=3)
    assert timing.copies == 4 == rotation_copies(1e6, 2e6)  # 4 MB of copies = 2 x L2
    # 1 ms per call > the replay target: one pass over the copies per replay
    assert timing.calls == 4 and timing.seconds == pytest.approx(1e-3 / 4)
    assert fake.captures == 1 and fake.replays == 1 + 3
    # warm-up, the sizing call, the capture's warm-up pass, then 1 + 3 replays
    assert len(seen) == 2 + 4 + 4 * 4 and len(set(seen[2:])) == 4


def test_eager_timing_launches_the_same_calls_without_a_graph():
    seen: list[int] = []
    fake = FakeDeviceBackend(l2_bytes=2e6, fixed_elapsed_s=1e-3)
    timing = time_case(_counting_case(1_000_000, seen), fake, "eager", repeats=3)
    assert fake.captures == 0 and timing.calls == 4
    assert len(seen) == 2 + 4 * (1 + 3) and timing.seconds == pytest.approx(1e-3 / 4)


@given(st.floats(1, 1e10), st.floats(0, 2e8))
def test_rotation_copies_outgrow_l2_within_bounds(input_bytes, l2_bytes):
    n = rotation_copies(input_bytes, l2_bytes)
    assert 1 <= n <= MAX_COPIES and (n - 1) * input_bytes <= MAX_ROTATION_BYTES
    capped = n == MAX_COPIES or n * input_bytes + input_bytes > MAX_ROTATION_BYTES
    assert n * input_bytes >= ROTATION_L2_MULTIPLE * l2_bytes or capped


def test_fp8_needs_sm89_and_bf16_gives_way_to_fp16():
    a100 = run_gpu_sweep(shapes={"linear": [(4, 32, 48)]}, repeats=1,
                         backend=FakeDeviceBackend("NVIDIA A100-SXM4-80GB", 1e3, (8, 0), 1e-4))
    assert set(a100["dtype"]) == {"bf16", "fp16", "fp32", "tf32"}
    t4 = run_gpu_sweep(shapes={"linear": [(4, 32, 48)], "add": [(8, 40)]}, repeats=1,
                       backend=FakeDeviceBackend("Tesla T4", 1e3, (7, 5), 1e-4))
    assert set(t4["dtype"]) == {"fp16", "fp32"} and set(t4["device"]) == {"t4"}
    unknown = run_gpu_sweep(shapes={"linear": [(4, 32, 48)]}, dtypes=["fp8", "bf16"],
                            repeats=1, backend=FakeDeviceBackend("Fake GPU", 1e3, (8, 6), 1e-4))
    assert set(unknown["dtype"]) == {"bf16"} and set(unknown["device"]) == {"Fake GPU"}


def test_the_old_sweeps_arguments_still_work():
    """Family-keyed (m, n, k) shapes and gemm/vector dtypes, as `perfcast measure --model`
    passed them to the old sweep: the kinds it timed, in the asked-for dtype."""
    rows = run_gpu_sweep(repeats=1, families=["gemm", "norm", "softmax"],
                         shapes={"gemm": [(4, 32, 48)], "norm": [(8, 40, 0)],
                                 "softmax": [(8, 40, 0)]},
                         gemm_dtypes=("fp16",), vector_dtypes=("fp16",),
                         backend=FakeDeviceBackend(l2_bytes=1.0, fixed_elapsed_s=1e-3))
    graph = rows[rows["timing"] == "cuda_graph"]
    assert list(graph["op"]) == ["linear", "ln", "softmax"]
    assert set(rows["dtype"]) == {"fp16"} and list(graph["n"]) == [32, 40, 40]


def test_ctrl_c_keeps_the_rows_timed_before_it():
    class Interrupting(FakeDeviceBackend):
        def elapsed_s(self, fn):
            if self.timed_runs >= 7:  # mid-way through the third row
                raise KeyboardInterrupt
            return super().elapsed_s(fn)

    with pytest.raises(SweepInterrupted) as err:
        run_gpu_sweep(shapes={"add": [(8, 40), (16, 40), (32, 40)]}, dtypes=["fp32"],
                      repeats=1, backend=Interrupting(l2_bytes=1e3, fixed_elapsed_s=1e-4))
    # rows: three graph rows, eager rows for the two smallest; two timed runs a row
    assert len(err.value.rows) == 3 and err.value.planned == 5


def test_launch_overhead_is_per_call():
    fake = FakeDeviceBackend(fixed_elapsed_s=1e-2)
    assert measure_launch_s(fake, repeats=3, calls=1000) == pytest.approx(1e-5)


def test_without_cuda_the_gpu_sweep_is_an_input_error_naming_device():
    if torch.cuda.is_available():
        pytest.skip("a CUDA GPU is present")
    for call in (run_gpu_sweep, measure_launch_s):
        with pytest.raises(InputError) as err:
            call()
        assert err.value.field == "device"
    with pytest.raises(InputError, match="device"):
        run_gpu_sweep(quick=True, repeats=1, seed=0, progress=None)  # helper B's call


# ---------------------------------------------------------------- the plan


def test_the_plan_is_seeded_and_within_budget():
    quick = kernel_cases("cuda", quick=True, seed=0)
    assert quick == kernel_cases("cuda", quick=True, seed=0)
    assert quick != kernel_cases("cuda", quick=True, seed=1)
    full = kernel_cases("cuda", quick=False, seed=0)
    assert len(quick) <= 260 and len(full) > 3 * len(quick)
    assert {c.family for c in quick} == {c.family for c in full}
    assert estimate_sweep_s(quick) <= 60 and estimate_sweep_s(full) <= 300  # on an H100
    assert all(len(c.shape) == len(SHAPE_FIELDS[c.kind]) for c in full)
    assert any(c.shape[0] & (c.shape[0] - 1) for c in quick if c.kind == "linear")  # odd sizes
    fp8 = [c for c in full if c.dtype == "fp8"]
    assert fp8 and all(c.shape[1] % 16 == 0 == c.shape[2] % 16 for c in fp8)


@pytest.mark.parametrize("timing", ["cuda_graph", "eager"])
def test_every_planned_case_can_be_priced(timing):
    """The rows the full plan would write (latency aside) price on an H100 and a T4."""
    for device, dtypes in (("h100-sxm", None), ("t4", ["fp16", "fp32"])):
        cases = kernel_cases("cuda", dtypes=dtypes, half="fp16" if dtypes else "bf16")
        rows = pd.DataFrame([{**dict.fromkeys(STORE_COLUMNS, 0.0), "device": device,
                              "family": c.family, "op": c.op, "dtype": c.dtype,
                              "weight_dtype": c.dtype, "timing": timing, "latency_s": 1.0,
                              **c.coords} for c in cases])
        times = _priced(rows, get_device(device))
        assert np.isfinite(times).all() and (times > 0).all()


def test_the_launch_subset_takes_the_smallest_of_each_kernel():
    cases = kernel_cases("cuda", quick=True)
    chosen = launch_subset(cases, per_kind=2)
    for key in {(c.kind, c.op, c.dtype) for c in cases}:
        group = [i for i, c in enumerate(cases) if (c.kind, c.op, c.dtype) == key]
        picked = [i for i in group if i in chosen]
        assert len(picked) == min(2, len(group))
        assert max(cases[i].work for i in picked) <= min(
            [cases[i].work for i in group if i not in chosen], default=np.inf)


def test_bad_requests_name_their_field():
    for kwargs, field in (({"families": ["gemm", "nope"]}, "families"),
                          ({"dtypes": ["fp64"]}, "dtypes"),
                          ({"shapes": {"lienar": [(1, 2, 3)]}}, "shapes"),
                          ({"shapes": {"linear": [(1, 2)]}}, "shapes.linear"),
                          ({"shapes": {"add": [(0, 2)]}}, "shapes.add")):
        with pytest.raises(InputError) as err:
            kernel_cases("cuda", **kwargs)
        assert err.value.field == field
    with pytest.raises(InputError) as err:
        run_torch_sweep("tpu")
    assert err.value.field == "device"


# ---------------------------------------------------------------- the same cases on torch CPU


def test_the_cpu_sweep_runs_every_kind_on_real_torch():
    rows = run_torch_sweep("cpu", repeats=2, shapes=TINY)
    check_measurements(rows)
    assert set(rows["timing"]) == {"cpu_wallclock"} and set(rows["device"]) == {"local-cpu"}
    assert set(rows["dtype"]) == {"fp32"} and set(rows["family"]) == {KINDS[k] for k in TINY}
    assert "attn:sdpa_flash" in set(rows["op"])  # CPU SDPA: flash only
    times = _priced(rows, local_cpu_device())
    assert np.isfinite(times).all() and (times > 0).all()


def test_the_cpu_quick_plan_of_two_families():
    rows = run_torch_sweep("cpu", quick=True, repeats=1, families=["norm", "softmax"])
    cases = kernel_cases("cpu", quick=True, families=["norm", "softmax"])
    assert len(rows) == len(cases) and set(rows["op"]) == {"ln", "ln:rms", "softmax"}


# ---------------------------------------------------------------- collectives


def test_collective_rows_are_comm_family_rows():
    sizes = collective_sizes(quick=True)
    assert sizes[0] == 4096 and sizes[-1] <= 2**28 and set(sizes) <= set(collective_sizes())
    row = _collective_row("allgather", 4096, 8, 1e-5, "h100-sxm", "test")
    frame = check_measurements(pd.DataFrame([row]))
    assert frame["family"].iloc[0] in COMM_FAMILIES and frame["n"].iloc[0] == 8


@pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.device_count() < 2,
                    reason="NCCL collectives need two GPUs")
def test_nccl_collectives_on_two_gpus():  # pragma: no cover - needs GPUs
    from perfcast.measure import run_collective_sweep

    rows = run_collective_sweep(repeats=1, sizes=[4096], gpus=2)
    assert set(rows["family"]) == {"allreduce", "allgather", "reducescatter"}
