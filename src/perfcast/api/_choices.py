"""The option groups requests share, and the one place their names become specs.

Each group is what a user names (a catalog model, a GPU or cluster preset, dtypes, a kernel
model); its `resolve`-style methods give the specs the model layers take. Defaults that more
than one command uses (kernel model, precision of the KV cache, the machines built around a
GPU) are chosen here, once.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import Field, ValidationError, model_validator

from perfcast.api._base import Group
from perfcast.errors import InputError, from_validation_error, read_user_json
from perfcast.specs import (
    Cluster,
    Device,
    ModelSpec,
    Precision,
    Stack,
    cluster_for,
    get_cluster,
    get_device,
    get_model,
    get_stack,
    parse_dtype,
    stack_names,
)

if TYPE_CHECKING:  # the kernel and comm layers (pandas) load when a request resolves, so
    # that a command's --help does not wait for them
    from perfcast.comm import CollectiveModel
    from perfcast.kernels import Calibration

__all__ = ["ACTIVATION_QUANT", "DEFAULT_STACKS", "KERNEL_MODELS", "Hardware", "KernelChoice",
           "EngineStackChoice", "ModelChoice", "PrecisionChoice", "ServingPrecision", "StackChoice",
           "calibration_summary", "collective_model", "default_stack", "device_from_spec",
           "host_speed_for", "kernel_model", "machines_for",
           "precision_spec", "serving_collective_model", "user_calibration"]

KERNEL_MODELS = ("calibrated", "learned", "roofline")
ACTIVATION_QUANT = ("separate", "fused")


def _shorthand(value: Any, field: str) -> Any:
    """A bare string for a group means its first field: `model="llama-2-7b"`."""
    return {field: value} if isinstance(value, str) else value


class ModelChoice(Group):
    """A catalog model (or HF id), or a path to an HF config.json: exactly one."""

    name: str | None = Field(None, alias="model", description="Catalog model name or HF id.")
    config: str | None = Field(None, alias="model_config",
                               description="Path to an HF config.json.")

    @model_validator(mode="before")
    @classmethod
    def _name_only(cls, value: Any) -> Any:
        return _shorthand(value, "model")

    def spec(self) -> ModelSpec:
        return get_model(self.name, self.config)


class Hardware(Group):
    """A catalog GPU (nodes of 8 built around it) or a cluster preset: exactly one."""

    gpu: str | None = Field(None, description="Catalog GPU name (see `hardware list`).")
    cluster: str | None = Field(None, description="Cluster preset instead of --gpu.")

    @model_validator(mode="before")
    @classmethod
    def _gpu_only(cls, value: Any) -> Any:
        return _shorthand(value, "gpu")

    def machines(self, gpus: int) -> Cluster:
        return machines_for(self.gpu, self.cluster, gpus)


def device_from_spec(path: Path) -> Device:
    """A device outside the catalog from its spec JSON (e.g. the `<out>.device.json`
    `perfcast measure` writes for the local CPU)."""
    data = read_user_json(path, "device_spec", "a device spec JSON (`perfcast measure` "
                          "writes one as <out>.device.json)")
    try:
        return Device(**data)
    except ValidationError as exc:
        raise from_validation_error(exc, prefix="device_spec.", origin=str(path)) from None


def machines_for(gpu: str | None, cluster: str | None, gpus: int) -> Cluster:
    """The `--gpu` (nodes of 8 built around it) or `--cluster` preset a command runs on,
    sized for `gpus`; exactly one of the two must be given."""
    if (gpu is None) == (cluster is None):
        raise InputError("gpu", "give exactly one of --gpu or --cluster",
                         "a catalog GPU (`perfcast hardware list`) or a cluster preset")
    return get_cluster(cluster, gpus) if cluster else cluster_for(get_device(gpu), gpus)


# The stack a question is about when the user names none: HF transformers for one eager
# step, Megatron-Core for training at scale, and for serving the stack whose kernels the
# serving validation was run with (TensorRT-LLM's tables; `--stack vllm` routes GEMM,
# attention and MoE to vLLM's own tables, not yet validated end to end).
DEFAULT_STACKS = {"infer": "trtllm", "serve": "trtllm", "capacity": "trtllm",
                  "step": "hf-transformers",
                  "train": "megatron-core"}


def default_stack(command: str) -> str:
    if command not in DEFAULT_STACKS:
        raise InputError("stack", f"{command!r} has no default stack", sorted(DEFAULT_STACKS))
    return DEFAULT_STACKS[command]


class StackChoice(Group):
    """The software stack the workload runs on (`perfcast stacks`)."""

    stack: str | None = Field(None, description="Software stack (`perfcast stacks`): "
                              + ", ".join(stack_names()) + "; default: the question's "
                              "(serving: trtllm, step: hf-transformers, train: megatron-core).")

    def spec(self, command: str) -> Stack:
        from perfcast.train import STACKS as FACTOR_STACKS

        stack = get_stack(self.stack if self.stack is not None else default_stack(command))
        if command != "train" and FACTOR_STACKS.get(stack.name) is not None:
            raise InputError("stack", f"{stack.name}'s kernel-time factors are fitted on its "
                             "training runs and apply to `perfcast train` only",
                             [n for n in stack_names() if FACTOR_STACKS.get(n) is None])
        return stack


class EngineStackChoice(StackChoice):
    """A stack whose host drives the GPU in the forecast (infer, serve, step), and how fast
    that host's CPU is."""

    host_speed: float = Field(1.0, gt=0.0, le=100.0, allow_inf_nan=False,
                              description="Host CPU speed relative to the stack's reference "
                              "CPU: eager host costs are divided by it.")


def host_speed_for(choice: EngineStackChoice, kernel_info: dict[str, Any],
                   stack: str) -> float:
    """The host speed a forecast divides the stack's host costs by: `--host-speed` when
    given, else the speed a user calibration fitted for this stack on whole measured steps
    (noted in `kernel_info`), else 1."""
    host = kernel_info.get("calibration_host")
    if "host_speed" in choice.model_fields_set or not host or host["stack"] != stack:
        return choice.host_speed
    kernel_info["host_speed_from"] = "calibration"
    return float(host["host_speed"])


class KernelChoice(Group):
    """How kernel times are priced: the calibrated model (plus a user calibration) or the
    plain roofline."""

    kernel_model: str = Field("calibrated", description="calibrated (the physical model "
                              "fitted per family), learned (gradient-boosted trees over "
                              "it, issue 18) or roofline.")
    calibration: str | None = Field(None, description="Extra calibration JSON from "
                                    "`perfcast calibrate`.")
    force_calibration: bool = Field(
        False, description="Apply --calibration although it was fitted on another device "
        "or stack (its corrections then stand for this device's).")

    def resolve(self, device: Device | None = None, stack: Stack | None = None):
        """(the kernel time model, a description of it for the payload); with a stack, its
        families priced from the stack's kernel sources and described per family."""
        if self.force_calibration and not self.calibration:
            raise InputError("force_calibration", "only applies with --calibration",
                             "omit it, or give --calibration FILE")
        model, info = kernel_model(self.kernel_model, self.calibration, device,
                                   None if stack is None else stack.name,
                                   self.force_calibration)
        if stack is None:
            return model, info
        from perfcast.kernels._stack import family_provenance, stack_kernel_model

        user = _user_families(model, device) if self.calibration else frozenset()
        model = stack_kernel_model(stack, model, user)
        info["stack"] = stack.name
        if device is not None:
            info["families"] = family_provenance(stack, device, roofline=self.kernel_model
                                                 == "roofline", user_families=user)
        return model, info


def _user_families(model, device: Device | None, learned=None) -> frozenset[str]:
    """Families a user calibration measured on the device: priced from it, whatever the
    stack's source or kernel model (a measurement of the target beats any shipped table);
    under the learned model, those its own target tier (`learned`, a LearnedKernels with
    the file's residuals) does not correct."""
    from perfcast.kernels._learned import LearnedTimeModel

    if device is None:
        return frozenset()
    if isinstance(model, LearnedTimeModel):
        model = model.fallback
    own = model.calibration.provenance.get("merged", {}).get("user_families", {})
    return frozenset(key.split("/")[0] for key in own.get(device.name, ())) \
        - set(_learned_families(learned, device))


def _learned_families(learned, device: Device | None) -> list[str]:
    """The families the learned model's target tier corrects on `device` (none without)."""
    own = learned.device_residual(device.name) if learned is not None and device else None
    return sorted(own.envelope) if own is not None else []


def kernel_model(name: str, calibration: str | None, device: Device | None = None,
                 stack: str | None = None, allow_mismatch: bool = False):
    """The kernel time model a command forecasts with, and a description of it (with the
    calibration tier it prices `device` in, when one is given, and what a user calibration
    changed)."""
    from perfcast.kernels import (
        PhysicsModel,
        RooflineModel,
        default_time_model,
        shipped_calibration,
    )
    from perfcast.kernels._learned import LearnedTimeModel, learned_time_model, shipped_learned

    if name not in KERNEL_MODELS:
        raise InputError("kernel_model", f"unknown model {name!r}", KERNEL_MODELS)
    if name == "roofline":
        if calibration:
            raise InputError("calibration", "only applies to --kernel-model calibrated",
                             "omit --calibration")
        return RooflineModel(), {"name": "roofline"}
    info: dict[str, Any] = {"name": name, "calibration": calibration or "shipped"}
    if calibration:
        own = user_calibration(calibration, device, stack, allow_mismatch)
        model = PhysicsModel(shipped_calibration().merged_with(own))
        learned = shipped_learned().with_target_tier(own.learned) if name == "learned" \
            else None
        info.update(calibration_summary(own, device, learned, name == "learned"))
    else:
        model = default_time_model()
    if name == "learned":
        model = (LearnedTimeModel(learned or shipped_learned(), model,
                                  _user_families(model, device, learned))
                 if calibration else learned_time_model())
    if device is not None:
        info["tier"] = model.tier(device)
        if name == "learned":
            info["learned_envelope"] = model.learned.device_coverage(device)
    return model, info


def _load_calibration(path: str) -> Calibration:
    """`Calibration.load`, remembered per version of the file (its path, size and
    modification time): a host-speed fit forecasts dozens of steps with one file."""
    from perfcast.kernels import Calibration

    try:
        st = Path(path).stat()
    except OSError:  # Calibration.load says what is wrong with the path
        return Calibration.load(path)
    return _load_version(str(Path(path).resolve()), st.st_size, st.st_mtime_ns)


@lru_cache(maxsize=8)
def _load_version(path: str, size: int, mtime_ns: int) -> Calibration:
    from perfcast.kernels import Calibration

    return Calibration.load(path)


def user_calibration(path: str, device: Device | None, stack: str | None = None,
                     allow_mismatch: bool = False) -> Calibration:
    """A user's calibration for the device (and stack) forecast. Its per-device corrections
    are all it adds to the shipped one, so a file for another device would change nothing
    while reported as used: an error naming both, unless `allow_mismatch`, which applies
    its corrections as the forecast device's. A file recording another stack than the
    forecast's is refused the same way. The user's families are recorded in provenance
    (`merged.user_families`), so a merged calibration still says which are the user's."""
    own = _load_calibration(path)
    cal_stack = own.provenance.get("stack")
    if stack is not None and cal_stack is not None and cal_stack != stack \
            and not allow_mismatch:
        raise InputError("calibration", f"{path} was fitted on stack {cal_stack}; this "
                         f"forecast is for stack {stack}",
                         f"--stack {cal_stack}, or --force-calibration to apply it "
                         "anyway")
    measured_on = sorted({*own.devices, *([own.provenance["device"]]
                                          if "device" in own.provenance else [])})
    if device is not None and device.name not in measured_on:
        mine = ", ".join(measured_on) or "no device"
        if not (allow_mismatch and len(measured_on) == 1):
            raise InputError("calibration", f"{path} holds corrections for {mine}, not for "
                             f"{device.name}, the device forecast here",
                             f"a calibration fitted on {device.name} (`perfcast calibrate "
                             f"--device {device.name}`)" + (
                                 ", or --force-calibration" if len(measured_on) == 1
                                 else ""))
        own.devices = ({device.name: next(iter(own.devices.values()))} if own.devices
                       else {})
        if own.learned.get("devices"):  # the learned tier's residual too
            own.learned = {**own.learned, "devices": {
                device.name: next(iter(own.learned["devices"].values()))}}
    own.provenance = {**own.provenance, "user_families": {
        d: sorted(fams) for d, fams in own.devices.items()}}
    return own


def calibration_summary(own: Calibration, device: Device | None, learned=None,
                        learned_model: bool = False) -> dict[str, Any]:
    """What a user calibration changes in a forecast on `device`: the family/dtype
    corrections it applies, those its check kept shipped, the stack it records, under the
    learned model (`learned_model`) the families its target tier corrects (`learned`: the
    shipped trees with the file's residuals, None when they do not apply), and warnings
    (a file from before graph timing, whose GPU kernel times include launch latency; a file
    that records no stack; a learned tier fitted over other trees)."""
    from perfcast.kernels._target import CALIBRATED

    prov = own.provenance
    checks = prov.get("checks", [])
    out: dict[str, Any] = {
        "calibration_device": prov.get("device"), "calibration_stack": prov.get("stack"),
        "calibration_families": sorted(own.devices.get(device.name, {})) if device else [],
        "calibration_kept_shipped": sorted(c["family"] for c in checks
                                           if c.get("status") != CALIBRATED),
    }
    warnings = []
    harness = prov.get("harness")
    gpu = prov.get("device_kind", "gpu" if device is None else device.kind) != "cpu"
    if gpu and (harness is None or harness.get("launch_included")):
        warnings.append("the calibration's GPU rows were timed with launch latency inside "
                        "each kernel time (`perfcast measure` before CUDA-graph timing, or "
                        "unrecorded): graph-replayed forecasts come out too slow; remeasure "
                        "and recalibrate")
    if "stack" not in prov:
        warnings.append("the calibration records no stack: it is applied whatever the "
                        "forecast's stack")
    if learned_model:
        out["calibration_learned_families"] = _learned_families(learned, device)
        if learned is None and own.learned.get("over"):  # a tier with no device: checks
            warnings.append("the calibration's learned-model residuals were fitted over "
                            "another version of the learned model and are not applied (its "
                            "physical corrections are): rerun `perfcast calibrate`")
    if device is not None and not out["calibration_families"] \
            and not out.get("calibration_learned_families"):
        warnings.append("the calibration corrects no kernel family on this device (its "
                        "check kept the shipped model everywhere)")
    if own.host:
        out["calibration_host"] = {"stack": own.host["stack"],
                                   "host_speed": own.host["host_speed"]}
    out["calibration_warnings"] = warnings
    return out


def collective_model() -> CollectiveModel:
    """The collective model training forecasts (`step`, `train`) price with: NCCL's
    algorithm choice over the cluster's levels, fitted on measured NCCL (`perfcast.comm`)."""
    from perfcast.comm import default_collective_model

    return default_collective_model()


def serving_collective_model() -> CollectiveModel:
    """The TP all-reduce of an inference engine (`infer`, `rag`; `serve --allreduce custom`,
    its default): the engines' one-shot kernel where it beats the ring (vLLM/TensorRT-LLM
    custom all-reduce), so one request priced by `infer` and by `serve` agree."""
    from perfcast.comm import CustomAllReduce

    return CustomAllReduce()


class PrecisionChoice(Group):
    """Activation, weight and KV-cache dtypes of an inference deployment."""

    dtype: str = Field("bf16", description="Activation (and default weight) dtype.")
    weight_dtype: str | None = Field(None, description="Weights, e.g. int4 for W4A16.")
    kv_dtype: str | None = Field(None, description="KV-cache dtype (default: --dtype).")

    def spec(self) -> Precision:
        return precision_spec(self.dtype, self.kv_dtype, self.weight_dtype, "separate")


class ServingPrecision(PrecisionChoice):
    """A serving engine's precision: fp8/fp4 activations quantised by the producing kernel
    by default, as engines do."""

    activation_quant: str = Field("fused", description="fused or separate.")

    def spec(self) -> Precision:
        return precision_spec(self.dtype, self.kv_dtype, self.weight_dtype, self.activation_quant)


def precision_spec(dtype: str, kv_dtype: str | None, weight_dtype: str | None,
                   activation_quant: str = "separate") -> Precision:
    """The KV cache defaults to the activation dtype where a cache can hold it, else bf16."""
    if activation_quant not in ACTIVATION_QUANT:
        raise InputError("activation_quant", f"unknown {activation_quant!r}", ACTIVATION_QUANT)
    act = parse_dtype(dtype, "dtype")
    weights = parse_dtype(weight_dtype, "weight_dtype") if weight_dtype else act
    kv = parse_dtype(kv_dtype, "kv_dtype") if kv_dtype else (act if act.value in (
        "fp16", "bf16", "fp32", "fp8") else parse_dtype("bf16"))
    return Precision(weights=weights, activations=act, kv_cache=kv,
                     activation_quant=activation_quant)
