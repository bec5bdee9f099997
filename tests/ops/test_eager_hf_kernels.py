"""The eager op table launches the kernels transformers launches: a half-precision HF
RMSNorm casts to fp32 and back (8 kernels, fp32 in between), rotate_half negates the half,
so a bf16 Llama decode layer is 40 kernels, as torch.profiler counted on an H100/H200
(docs/validation/gpu_check/h200_host_check.json: decoder_layer_kernels)."""

import json
from pathlib import Path

import pytest

from perfcast.ops import eager_ops
from perfcast.specs import ModelSpec, Precision

CHECK = Path(__file__).resolve().parents[2] / "docs/validation/gpu_check/h200_host_check.json"
SPEC = ModelSpec(name="tiny-llama", model_type="llama", hidden_size=64, num_layers=1,
                 num_heads=4, num_kv_heads=4, head_dim=16, intermediate_size=128,
                 vocab_size=256, position="rope", norm="rmsnorm", activation="silu",
                 gated_mlp=True)


def _layer(dtype: str, fused: bool = False):
    ops = eager_ops(SPEC, 1, 1, "decode", Precision(weights=dtype, activations=dtype,
                                                   kv_cache=dtype),
                    fused=fused, attention="sdpa", context=16)
    return ops[ops["layer"] == "layer"]


def test_bf16_decode_layer_has_the_profiled_kernel_count():
    probe = next(r for r in json.loads(CHECK.read_text())["rows"]
                 if r["what"] == "host_probe" and r["device"] == "cuda")
    assert int(_layer("bf16")["count"].sum()) == probe["decoder_layer_kernels"] == 40


def test_fp32_rmsnorm_has_no_casts():
    ops = _layer("fp32")
    assert not ops["op"].str.startswith("cast:").any()
    assert int(ops["count"].sum()) == 36


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_half_rmsnorm_moves_fp32_between_its_casts(dtype):
    ops = _layer(dtype).set_index("op")
    e = 64  # one token, hidden 64
    assert ops.loc["cast:ln_1.to_fp32", "bytes_written"] == 4 * e
    assert ops.loc["powu:ln_1.pow", "bytes_read"] == 4 * e
    assert ops.loc["mul:ln_1.weight", "bytes_written"] == 2 * e


def test_fusion_of_a_half_rmsnorm_moves_the_dtype_once():
    fused = _layer("bf16", fused=True)
    norm = fused[fused["op"].str.endswith("rms_ln_1")].iloc[0]
    assert norm["bytes_read"] == norm["bytes_written"] == 2 * 64


@pytest.mark.parametrize("name, rows_per_token", [("qwen3-0.6b", "heads"), ("olmo-2-7b", 1)])
def test_q_and_k_are_rms_normed_where_transformers_does_it(name, rows_per_token):
    from perfcast.specs import get_model

    model = get_model(name)
    ops = eager_ops(model, 1, 64, "forward", Precision(weights="bf16", activations="bf16",
                                                      kv_cache="bf16"), attention="sdpa")
    q = ops[ops["op"] == "powu:q_norm.pow"].iloc[0]
    rows = 64 * (model.num_heads if rows_per_token == "heads" else 1)
    assert q["m"] == rows and q["n"] == model.num_heads * model.head_dim / rows * 64
    llama = eager_ops(get_model("llama-3.2-1b"), 1, 64, "forward", Precision(
        weights="bf16", activations="bf16", kv_cache="bf16"), attention="sdpa")
    assert not llama["op"].str.contains("q_norm").any()
