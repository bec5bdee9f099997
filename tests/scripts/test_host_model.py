"""The hf-transformers host model: derived from the shipped host probe (scripts/
derive_host_model.py --check), and the probe and GPU host check run on the CPU."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from perfcast.specs import get_stack

ROOT = Path(__file__).resolve().parents[2]


def _script(name: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "scripts" / name), *args],
                          capture_output=True, text=True, timeout=300)


def test_shipped_host_model_is_what_the_probe_gives():
    done = _script("derive_host_model.py", "--check")
    assert done.returncode == 0, done.stdout + done.stderr


def test_host_model_terms_are_measured_and_positive():
    host = get_stack("hf-transformers").host
    probe = json.loads((ROOT / "src/perfcast/compose/data/host_eager_torch.json").read_text())
    assert probe["schema"] == 2 and probe["probes"]["cuda"]["device"] == "cuda"
    assert host.op_dispatch_s == pytest.approx(probe["derived"]["op_dispatch_s"], abs=1e-9)
    assert host.generate_s > 0 and host.step_s > 0
    assert probe["probes"]["cuda"]["cpu"] in host.reference_cpu


def _tiny_rows(script: str, parts: str, tmp_path: Path) -> list[dict]:
    """The rows a GPU check script writes with --tiny on the CPU (none may be an error)."""
    pytest.importorskip("transformers")
    out = tmp_path / "check.json"
    done = _script(script, "--tiny", "--out", str(out), "--parts", parts)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = json.loads(out.read_text())["rows"]
    assert not [r for r in rows if "error" in r]
    return rows


@pytest.mark.cpu_timing  # its per-layer slope is a wall-time difference: run alone, after
def test_gpu_host_check_runs_tiny_on_the_cpu(tmp_path):  # the rest (tests/conftest.py)
    rows = _tiny_rows("gpu_host_check.py", "host_cpu,hf_steps", tmp_path)
    probe = next(r for r in rows if r["what"] == "host_probe")
    assert probe["decoder_layer_s"] > 0 and probe["generate_per_layer"]["per_layer_s"] > 0
    assert {r["what"] for r in rows} == {"host_probe", "prefill", "generate_token"}


def test_spread_covers_every_other_probed_host_either_way():
    probe = json.loads((ROOT / "src/perfcast/compose/data/host_eager_torch.json").read_text())
    ref = probe["probes"]["cuda"]
    per_layer = [h["forward_per_layer"]["per_layer_s"] + h["generate_per_layer"]["per_layer_s"]
                 for h in (ref, *probe["other_hosts"])]
    low, high = get_stack("hf-transformers").host.spread
    assert low == pytest.approx(1 / high, rel=1e-3) and len(per_layer) >= 3
    assert all(low * per_layer[0] * 0.999 <= t <= high * per_layer[0] * 1.001 for t in per_layer)
    assert get_stack("torch-compile").host.spread == (low, high)


def test_training_host_terms_are_the_training_probes():
    host = get_stack("hf-transformers").host
    probe = json.loads((ROOT / "src/perfcast/compose/data/host_eager_torch.json").read_text())
    assert host.train_dispatch_s == pytest.approx(probe["derived"]["train_dispatch_s"],
                                                  abs=1e-9)
    # autograd's backward and the optimizer cost more host per kernel than a forward's
    assert host.train_dispatch_s > host.op_dispatch_s and host.train_step_s > 0
    assert get_stack("fsdp").host.train_dispatch_s == host.train_dispatch_s
    assert get_stack("megatron-core").host.train_dispatch_s is None


def test_gpu_train_check_runs_tiny_on_the_cpu(tmp_path):
    rows = _tiny_rows("gpu_train_check.py", "memory,train_llm,host_train_probe,profile_llm",
                      tmp_path)
    assert {r["what"] for r in rows} == {"memory", "train_llm", "host_train_probe",
                                         "profile_llm"}
    probe = [r for r in rows if r["what"] == "host_train_probe"]
    assert {(r["policy"], r["layers"]) for r in probe} == {
        (p, n) for p in ("amp", "pure-bf16") for n in (1, 5)}
    assert all(r["iteration_s"] > 0 for r in rows if r["what"] == "train_llm")
