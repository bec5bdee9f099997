"""A model's own kernels and whole steps, timed on this machine (`perfcast measure --model`).

`plan_model_steps` checks what the harness can run (a GPT-2-type transformer or ResNet-18, a
stack whose eager kernels it emulates, the device's dtypes) and builds perfcast's own eager op
table of every step (`perfcast step`'s builders: `ops.eager_ops`, `ops.cnn_ops`): the
distinct (op, shape) kernels become the shapes `run_torch_cpu_sweep(ops=...)` times, and each
step's kernel count is recorded beside its measured time. `run_model_steps` then times whole
steps end to end: a forward (prefill), one decode step over a KV cache of `context` tokens
and a training step (forward, backward of a fixed logits gradient, optimizer step), with
perfcast's hand-written torch models (`torch_models`) and, when `transformers` is installed,
HF's own model built from the catalog config (random weights, nothing downloaded).

The measured steps are what the composition layer's host and launch overheads are fitted on
(a step's measured time minus its kernels' forecast, over its kernel count); `load_steps`
reads the `<out>.steps.json` file back for `calibrate`. torch (and transformers) are
imported inside the functions: perfcast itself never needs them.
"""

from __future__ import annotations

import importlib.util
import math
import platform
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any, Literal

import pandas as pd
from pydantic import ConfigDict, Field, TypeAdapter, ValidationError
from pydantic.dataclasses import dataclass

from perfcast.errors import InputError, close_matches, from_validation_error, read_user_json
from perfcast.measure._cpu import CPU_DEVICE_NAME, cpu_info
from perfcast.measure._torch_cpu import SHAPE_ARITY, TORCH_OPS
from perfcast.ops import CNN_MODELS, cnn_ops, eager_ops
from perfcast.progress import ProgressFn
from perfcast.specs import (
    ParallelPlan,
    Precision,
    bytes_per_element,
    get_device,
    get_model,
    get_stack,
    load_model_config,
    parse_dtype,
)

__all__ = ["MODEL_STEP_STACKS", "STEP_MODES", "STEP_RUNNERS", "ModelStepPlan",
           "StepMeasurement", "StepMeasurements", "load_steps", "plan_model_steps",
           "run_model_steps"]  # the package exports the classes and functions

STEPS_SCHEMA_VERSION = 1
STEP_MODES = ("forward", "decode", "training")
STEP_RUNNERS = ("perfcast", "transformers")  # hand-written torch models; HF's own
# Stacks whose eager kernels the harness runs: HF transformers with SDPA or legacy attention.
MODEL_STEP_STACKS = ("hf-transformers", "hf-transformers-legacy")
OPTIMIZERS = ("adam", "sgd")
CNN_STEP_MODELS = ("resnet18",)  # torch_models.ResNet18
IMAGE_SIZE = 224
MAX_BATCH, MAX_POSITIONS = 256, 4096
MAX_CPU_PARAMS = 400e6  # one CPU thread: gpt2 and gpt2-medium take seconds per training step
DEVICE_DTYPES = {"cpu": ("fp32",), "cuda": ("bf16", "fp16", "fp32")}
_GPT2_ACTIVATIONS = (None, "gelu_new")  # torch_models.gelu_new
_VECTOR_POOLS = ("bn", "maxpool", "avgpool")  # torch sweep shape (channels, size)
_SWEEP_ARITY = SHAPE_ARITY  # the torch sweep's shape tuple per op (else 2)
_CHECKABLE_SHAPES = 4  # an op timed at fewer shapes gets neighbours (see _neighbours)
_NO_NEIGHBOURS = ("adam", "fill", "linear", "bmm", "conv", "copy", "bn", "maxpool", "avgpool")
_ADAM_SWEEP_PARAMS = 2**24  # Adam timed on at most this many parameters (268 MB of state)
_COPY_HEAD_DIM = 64  # _torch_cpu's copy kernel: [m, n] as heads of 64
_CROP_NOTE = "HF decode: the cache is cropped back to `context` after each step (a view)"


# ---------------------------------------------------------------- the plan


@dataclass(frozen=True, config=ConfigDict(arbitrary_types_allowed=True))
class ModelStepPlan:
    """What `run_model_steps` times: the model (a catalog name or a config's label, with
    its HF config; None for a CNN), the stack and the attention it implies, the device
    kind and dtype, the step shapes, the (runner, mode) cases, each mode's kernel count in
    perfcast's op table, the torch-sweep shapes of those kernels (`run_torch_cpu_sweep`'s
    `ops=`) and the op names the sweep cannot time; on cuda also the kernels as the CUDA
    sweep's kinds (`run_gpu_sweep(shapes=...)`, SHAPE_FIELDS order), and `skipped_ops` are
    the ops that sweep has no kind for."""

    model: str
    model_config: str | None
    config: dict | None
    stack: str
    attention: str | None
    device: str
    dtype: str
    batch: int
    seq_len: int | None
    context: int | None
    optimizer: str | None
    cases: tuple[tuple[str, str], ...]
    kernels: dict[str, int]
    shapes: dict[str, list[tuple[int, ...]]]
    skipped_ops: tuple[str, ...]
    gpu_shapes: dict[str, list[tuple[int, ...]]] | None = None  # cuda: run_gpu_sweep's kinds

    @property
    def kernel_shapes(self) -> int:
        """Distinct kernels timed: torch-sweep shapes on a CPU, CUDA-sweep shapes on cuda."""
        shapes = self.shapes if self.gpu_shapes is None else self.gpu_shapes
        return sum(len(v) for v in shapes.values())


def _choice(field: str, value: str, allowed: Sequence[str]) -> str:
    key = str(value).strip().lower()
    if key not in allowed:
        hint = close_matches(str(value), allowed)
        raise InputError(field, f"unknown {field.removesuffix('s')} {value!r}" + (
            f"; did you mean {', '.join(hint)}?" if hint else ""), allowed)
    return key


def _runnable(device: str) -> str:
    return (f"gpt2{', gpt2-medium' if device == 'cpu' else ' (any size)'}, resnet18, or a "
            "gpt2-type --model-config" + (" of at most 400M parameters" if device == "cpu"
                                          else ""))


def _transformer(name: str | None, config_path: str | None, device: str
                 ) -> tuple[str, dict, Any]:
    """(label, HF config, ModelSpec) of a GPT-2-type model the harness can run here."""
    spec = get_model(name, config_path)
    config = (load_model_config(name) if config_path is None
              else read_user_json(config_path, "model_config", "a HuggingFace config.json"))
    label = spec.name
    if spec.model_type != "gpt2" or config.get("activation_function") not in _GPT2_ACTIVATIONS:
        raise InputError("model", f"the measurement harness runs GPT-2-type transformers "
                         f"(model_type gpt2, gelu_new) and ResNet-18, not {label} "
                         f"({spec.model_type or 'unknown type'})", _runnable(device))
    params = spec.total_params()
    if device == "cpu" and params > MAX_CPU_PARAMS:
        raise InputError("model", f"{label} has {params / 1e6:,.0f}M parameters: too many to "
                         "time on one CPU thread", _runnable(device))
    return label, config, spec


def _modes(given: Sequence[str] | None, cnn: bool, label: str) -> tuple[str, ...]:
    if not given:
        return ("forward",) if cnn else STEP_MODES
    modes = tuple(dict.fromkeys(_choice("modes", m, STEP_MODES) for m in given))
    if cnn and modes != ("forward",):
        raise InputError("modes", f"{label} runs its inference forward only (as `perfcast "
                         "step` forecasts it)", ["forward"])
    return modes


def _runners(given: Sequence[str] | None, cnn: bool) -> tuple[str, ...]:
    have_hf = not cnn and importlib.util.find_spec("transformers") is not None
    if not given:
        return STEP_RUNNERS if have_hf else ("perfcast",)
    runners = tuple(dict.fromkeys(_choice("runner", r, STEP_RUNNERS) for r in given))
    if "transformers" in runners and cnn:
        raise InputError("runner", "transformers builds causal LMs, not ResNet-18",
                         ["perfcast"])
    if "transformers" in runners and not have_hf:
        raise InputError("runner", "the transformers runner needs HF transformers, which is "
                         "not installed", "pip install transformers, or --runners perfcast")
    return runners


def _check_sizes(batch: int, seq_len: int | None, context: int | None,
                 n_positions: int | None) -> None:
    """batch <= MAX_BATCH; a prompt, and a cache plus its new token, within the model's
    positions."""
    positions = n_positions or MAX_POSITIONS
    for field, value, high in (("batch", batch, MAX_BATCH), ("seq_len", seq_len, positions),
                               ("context", context, positions - 1)):
        if value is not None and not 1 <= value <= high:
            raise InputError(field, f"must be in [1, {high}], got {value}", f"1..{high}")


def plan_model_steps(model: str | None, stack: str = "hf-transformers", *,
                     model_config: str | None = None, device: str = "cpu",
                     dtype: str | None = None, batch: int = 1, seq_len: int = 128,
                     context: int | None = None, optimizer: str = "adam",
                     modes: Sequence[str] | None = None,
                     runners: Sequence[str] | None = None) -> ModelStepPlan:
    """Check the request against what the harness runs and build the plan: every refusal
    is an InputError naming the option (`model`, `stack`, `dtype`, `modes`, `runner`, ...)
    and what is allowed. `context` (decode's cached tokens) defaults to `seq_len`; `modes`
    to every mode the model has; `runners` to both when transformers is installed."""
    device = _choice("device", device, tuple(DEVICE_DTYPES))
    stack_spec = get_stack(stack)
    if stack_spec.name not in MODEL_STEP_STACKS:
        raise InputError("stack", f"the measurement harness runs HF transformers' eager "
                         f"kernels; it cannot emulate {stack_spec.name}", MODEL_STEP_STACKS)
    dtype = parse_dtype(dtype or DEVICE_DTYPES[device][0], "dtype").value
    if dtype not in DEVICE_DTYPES[device]:
        raise InputError("dtype", f"{dtype} steps are not timed on {device}",
                         DEVICE_DTYPES[device])
    optimizer = _choice("optimizer", optimizer, OPTIMIZERS)
    cnn = model is not None and model.strip().lower() in CNN_MODELS and model_config is None
    if cnn:
        label, config, spec = model.strip().lower(), None, None
        if label not in CNN_STEP_MODELS:
            raise InputError("model", f"the measurement harness has no {label}",
                             _runnable(device))
    else:
        label, config, spec = _transformer(model, model_config, device)
    chosen = _modes(modes, cnn, label)
    if context is not None and not cnn and "decode" not in chosen:
        raise InputError("context", "only applies to the decode step",
                         "omit --context, or add decode to --modes")
    context = None if cnn or "decode" not in chosen else (seq_len if context is None
                                                          else context)
    _check_sizes(batch, None if cnn else seq_len, context,
                 None if cnn else config.get("n_positions"))
    attention = None if cnn else ("sdpa" if stack_spec.attention.fused else "eager")
    plan = dict(model=label, model_config=model_config, config=config, stack=stack_spec.name,
                attention=attention, device=device, dtype=dtype, batch=batch,
                seq_len=None if cnn else seq_len, context=context,
                optimizer=optimizer if "training" in chosen else None)
    tables = {mode: _op_table(spec, plan, mode) for mode in chosen}
    shapes, skipped = _kernel_shapes(tables.values(), batch, dtype)
    cases = tuple((r, m) for r in _runners(runners, cnn) for m in chosen)
    gpu = None
    if device == "cuda":
        gpu, skipped = _gpu_shapes(tables.values(), plan)
    return ModelStepPlan(**plan, cases=cases, shapes=shapes, skipped_ops=skipped,
                         kernels={m: int(t["count"].sum()) for m, t in tables.items()},
                         gpu_shapes=gpu)


def _op_table(spec: Any, plan: dict[str, Any], mode: str) -> pd.DataFrame:
    """perfcast's eager op table of one step, built as `perfcast step` builds it."""
    precision = Precision.uniform(plan["dtype"])
    if spec is None:
        return cnn_ops(plan["model"], plan["batch"], IMAGE_SIZE, precision)
    stack = get_stack(plan["stack"])
    decode = mode == "decode"
    return eager_ops(spec, plan["batch"], 1 if decode else plan["seq_len"], mode, precision,
                     ParallelPlan(), bool(stack.fused), False,
                     plan["optimizer"] if mode == "training" else None,
                     attention=plan["attention"], context=plan["context"] if decode else 0)


def _conv_shape(row: Any, batch: int, elem_bytes: float) -> tuple[int, ...] | None:
    """(batch, c_in, size, c_out, kernel, stride) of a conv row: its implicit-GEMM m, n, k
    and the input it reads (bytes_read = input + weights, ops._cnn), padding kernel // 2."""
    m, n, k = int(row.m), int(row.n), int(row.k)
    inputs = round(row.bytes_read / elem_bytes) - n * k
    out = math.isqrt(m // batch)
    for kernel in (3, 1, 7, 5):
        c_in, rest = divmod(k, kernel * kernel)
        if rest or c_in < 1 or inputs % (batch * c_in):
            continue
        size = math.isqrt(inputs // (batch * c_in))
        for stride in (1, 2):
            if (size * size * batch * c_in == inputs and out * out * batch == m
                    and (size + 2 * (kernel // 2) - kernel) // stride + 1 == out):
                return (batch, c_in, size, n, kernel, stride)
    return None


def _torch_shape(op: str, row: Any, batch: int, elem_bytes: float) -> tuple[int, ...] | None:
    """The torch sweep's shape tuple of one op-table row (`torch_sweep_shapes`' layout)."""
    b, m, n, k = int(row.b), int(row.m), int(row.n), int(row.k)
    if op == "linear":
        return (b * m, n, k)
    if op in ("bmm", "sdpa"):  # sdpa: b = batch x heads, m queries over n keys, k head dim
        return (b, m, n, k)
    if op == "adam":  # timed on a slice: memory-bound, priced per byte at the model's size
        return (min(b * m, _ADAM_SWEEP_PARAMS), n)
    if op == "conv":
        return _conv_shape(row, batch, elem_bytes)
    if op in _VECTOR_POOLS:
        size = math.isqrt(n)
        return (b * m, size) if size * size == n else None
    if op == "copy" and n % _COPY_HEAD_DIM:  # the vocabulary's copy moves whole heads of 64
        return None
    return (b * m, n)


def _kernel_shapes(tables: Any, batch: int, dtype: str
                   ) -> tuple[dict[str, list[tuple[int, ...]]], tuple[str, ...]]:
    """Distinct (op, shape) kernels of the tables, in launch order, as torch-sweep shapes;
    and the ops the torch vocabulary has no kernel for (sdpa, dropout, optimizers, ...) or
    not at some shape (a copy whose width is not whole heads of 64)."""
    elem_bytes = bytes_per_element(parse_dtype(dtype, "dtype"))
    shapes: dict[str, dict[tuple[int, ...], None]] = {}
    skipped: dict[str, None] = {}
    for table in tables:
        for row in table.itertuples():
            op = row.op.split(":")[0]
            shape = _torch_shape(op, row, batch, elem_bytes) if op in TORCH_OPS else None
            if shape is None or len(shape) != _SWEEP_ARITY.get(op, 2) or min(shape) < 1:
                skipped[op] = None
                continue
            shapes.setdefault(op, {})[shape] = None
    out = {op: list(s) for op, s in shapes.items()}
    for op, own in out.items():
        if len(own) < _CHECKABLE_SHAPES and op not in _NO_NEIGHBOURS:
            own += [n for shape in list(own) for n in _neighbours(op, shape) if n not in own]
    return out, tuple(skipped)


def _neighbours(op: str, shape: tuple[int, ...]) -> list[tuple[int, ...]]:
    """Shapes beside one the model runs (rows x 2, / 2; attention: tokens x 2, / 2 and heads
    x 2): a kernel the step launches at only a shape or two still gets enough rows for
    `calibrate`'s out-of-sample check (calibrate.MIN_ROWS), near where the model runs it."""
    if op == "sdpa":
        b, m, n, k = shape
        if m == 1:  # decode: one query over n keys
            return [(b, 1, 2 * n, k), (b, 1, max(n // 2, 1), k), (2 * b, 1, n, k)]
        return [(b, 2 * m, 2 * n, k), (b, max(m // 2, 1), max(n // 2, 1), k),
                (2 * b, m, n, k)]
    if len(shape) != 2:
        return []
    m, n = shape
    return [(2 * m, n), (max(m // 2, 1), n), (4 * m, n)]


# op-table op -> the CUDA sweep's kind (measure._gpu_cases.KINDS)
_GPU_KINDS = {"linear": "linear", "bmm": "bmm", "ln": "layer_norm", "softmax": "softmax",
              "add": "add", "conv": "conv", "embedding": "embedding", "sdpa": "attention"}


def _gpu_shape(op: str, row: Any, plan: dict[str, Any], elem_bytes: float
               ) -> tuple[str, tuple[int, ...]] | None:
    """(kind, shape in SHAPE_FIELDS order) of one op-table row on the CUDA sweep, or None."""
    b, m, n, k = int(row.b), int(row.m), int(row.n), int(row.k)
    config = plan["config"] or {}
    if op == "sdpa":  # b = batch x heads (MHA: kv_heads = heads); m queries, n keys
        heads = config["n_head"]
        if row.family == "attn_decode":
            return "attn_decode", (b // heads, heads, heads, k, n)
        return "attn_prefill", (b // heads, heads, heads, k, m)
    if op == "embedding":
        table = "n_positions" if row.op.endswith("positions") else "vocab_size"
        return "embedding", (b * m, n, config[table])
    if op == "conv":
        shape = _conv_shape(row, plan["batch"], elem_bytes)
        return None if shape is None else ("conv", shape)
    shape = {"linear": (b * m, n, k), "bmm": (b, m, n, k)}.get(op, (b * m, n))
    return _GPU_KINDS[op], shape


def _gpu_shapes(tables: Any, plan: dict[str, Any]
                ) -> tuple[dict[str, list[tuple[int, ...]]], tuple[str, ...]]:
    """The tables' distinct kernels the CUDA sweep has a kind for (GEMMs, attention, layer
    norm, softmax, residual add, embedding, conv), in launch order; and the ops it has none
    for (the gelu_new pieces, scalar ops, copies, dropout, optimizers, ...)."""
    elem_bytes = bytes_per_element(parse_dtype(plan["dtype"], "dtype"))
    out: dict[str, dict[tuple[int, ...], None]] = {}
    skipped: dict[str, None] = {}
    for table in tables:
        for row in table.itertuples():
            op = row.op.split(":")[0]
            found = _gpu_shape(op, row, plan, elem_bytes) if op in _GPU_KINDS else None
            if found is None or min(found[1]) < 1:
                skipped[op] = None
                continue
            out.setdefault(found[0], {})[found[1]] = None
    return {kind: list(shapes) for kind, shapes in out.items()}, tuple(skipped)


# ---------------------------------------------------------------- the results


_STRICT = ConfigDict(extra="forbid")


@dataclass(frozen=True, config=_STRICT)
class StepMeasurement:
    """One step timed end to end: its mode and shape (seq_len: new tokens per sequence, 1
    in decode; None for a CNN; context: cached tokens in decode), the runner, the median
    wall seconds, and the kernels perfcast's op table launches for it."""

    mode: Literal["forward", "decode", "training"]
    runner: Literal["perfcast", "transformers"]
    batch: Annotated[int, Field(ge=1)]
    seq_len: Annotated[int | None, Field(ge=1)]
    context: Annotated[int | None, Field(ge=1)]
    optimizer: Literal["adam", "sgd"] | None
    measured_s: Annotated[float, Field(gt=0, allow_inf_nan=False)]
    kernels: Annotated[int, Field(ge=1)]
    repeats: Annotated[int, Field(ge=1)]
    quiet: bool | None = None  # CPU: the machine held steady (None on cuda)
    slowdown: float | None = None  # CPU: reference-kernel slowdown while timed
    image_size: int | None = None  # a CNN's images


@dataclass(frozen=True, config=_STRICT)
class StepMeasurements:
    """The `<out>.steps.json` file: the model, stack, device and dtype the steps ran on,
    the host and library versions, the steps, and how they were timed (provenance)."""

    schema_version: Literal[1]
    model: Annotated[str, Field(min_length=1)]
    model_config: str | None
    stack: Annotated[str, Field(min_length=1)]
    attention: str | None
    device: Annotated[str, Field(min_length=1)]
    dtype: Annotated[str, Field(min_length=1)]
    host: str
    torch: str
    transformers: str | None
    steps: Annotated[tuple[StepMeasurement, ...], Field(min_length=1)]
    provenance: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def load_steps(path: str | Path) -> StepMeasurements:
    """A steps file written by `perfcast measure --model`; a bad file is an InputError naming
    the field (`steps.0.measured_s`, ...)."""
    data = read_user_json(path, "steps", "a <out>.steps.json from `perfcast measure --model`")
    try:
        return TypeAdapter(StepMeasurements).validate_python(data)
    except ValidationError as exc:
        raise from_validation_error(exc, origin=str(path)) from None


# ---------------------------------------------------------------- running the steps


def _torch() -> Any:
    try:
        import torch
    except ImportError:
        raise InputError("model", "timing a model's steps needs PyTorch, which is not "
                         "installed", "pip install 'perfcast[torch]'") from None
    return torch


def _perfcast_model(plan: ModelStepPlan) -> Any:
    from perfcast.measure import torch_models as tm

    if plan.config is None:
        return tm.ResNet18()
    c = plan.config
    return tm.GPT2(tm.GPT2Config(
        vocab_size=c["vocab_size"], n_positions=c["n_positions"], n_embd=c["n_embd"],
        n_layer=c["n_layer"], n_head=c["n_head"], n_inner=c.get("n_inner"),
        layer_norm_epsilon=c.get("layer_norm_epsilon", 1e-5), attention=plan.attention))


def _hf_model(plan: ModelStepPlan) -> Any:
    """HF's causal LM from the config (random weights, nothing downloaded), with the stack's
    attention implementation."""
    from transformers import AutoConfig, AutoModelForCausalLM

    config = {k: v for k, v in plan.config.items() if k != "model_type"}
    hf_config = AutoConfig.for_model(plan.config.get("model_type", "gpt2"), **config)
    return AutoModelForCausalLM.from_config(hf_config, attn_implementation=plan.attention)


def _cache_name(model: Any) -> str:
    """The keyword this transformers version takes the KV cache under (5.x: `cache`)."""
    import inspect

    params = inspect.signature(model.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def _step_fn(plan: ModelStepPlan, runner: str, mode: str, model: Any, torch: Any,
             dev: Any, dtype: Any, seed: int) -> Callable[[], object]:
    """One step as a zero-argument call; its setup (inputs, a prefilled cache, the
    optimizer) done here, untimed."""
    gen = torch.Generator().manual_seed(seed)
    if plan.config is None:
        images = torch.randn(plan.batch, 3, IMAGE_SIZE, IMAGE_SIZE, generator=gen)
        images = images.to(dev, dtype)
        model.eval()
        return lambda: model(images)
    tokens = plan.context + 1 if mode == "decode" else plan.seq_len
    ids = torch.randint(0, plan.config["vocab_size"], (plan.batch, tokens), generator=gen)
    ids = ids.to(dev)
    hf = runner == "transformers"
    if mode == "decode":
        return _decode_fn(model, ids, hf, torch)
    if mode == "training":
        grad = torch.randn(plan.batch, plan.seq_len, plan.config["vocab_size"],
                           generator=gen).to(dev, dtype)
        return _train_fn(model, ids, grad, plan.optimizer, hf, torch)
    model.eval()
    if not hf:
        return lambda: model(ids)
    cache = plan.attention == "sdpa"  # HF's eval forward fills a cache (use_cache=True)
    return lambda: model(input_ids=ids, use_cache=cache).logits


def _decode_fn(model: Any, ids: Any, hf: bool, torch: Any) -> Callable[[], object]:
    """One new token per sequence over a cache of the prompt's tokens (ids[:, :-1])."""
    prompt, new = ids[:, :-1], ids[:, -1:]
    model.eval()
    with torch.no_grad():
        if not hf:
            past = model.prefill(prompt)
            return lambda: model.decode(new, past)
        out = model(input_ids=prompt, use_cache=True)
    cache = out["cache"] if "cache" in out else out["past_key_values"]  # 5.x, 4.x
    kwargs = {_cache_name(model): cache, "use_cache": True}

    def step() -> object:  # _CROP_NOTE
        logits = model(input_ids=new, **kwargs).logits
        cache.crop(-1)
        return logits

    return step


def _train_fn(model: Any, ids: Any, grad: Any, optimizer: str, hf: bool, torch: Any
              ) -> Callable[[], object]:
    """Forward, backward of the fixed logits gradient `grad`, optimizer step."""
    optim = (torch.optim.Adam if optimizer == "adam" else torch.optim.SGD)(
        model.parameters(), lr=1e-5)
    model.train()

    def step() -> None:
        logits = model(input_ids=ids, use_cache=False).logits if hf else model(ids)
        logits.backward(grad)
        optim.step()
        optim.zero_grad(set_to_none=True)

    return step


def _time_cuda(fn: Callable[[], object], torch: Any, repeats: int, grad: bool) -> dict:
    """Median wall seconds of `repeats` calls, each ended by a device synchronise (the host's
    launch and dispatch time included, as a step pays it), after two warm-up calls."""
    with torch.set_grad_enabled(grad):
        for _ in range(2):
            fn()
        torch.cuda.synchronize()
        samples = []
        for _ in range(repeats):
            start = time.perf_counter()
            fn()
            torch.cuda.synchronize()
            samples.append(time.perf_counter() - start)
    return {"seconds": statistics.median(samples), "quiet": None, "slowdown": None}


def _device(plan: ModelStepPlan, torch: Any) -> Any:
    if plan.device == "cuda" and not torch.cuda.is_available():
        raise InputError("device", "torch sees no CUDA GPU", ["cpu"])
    return torch.device(plan.device)


def run_model_steps(plan: ModelStepPlan, quick: bool = False, repeats: int = 5, seed: int = 0,
                    progress: ProgressFn | None = None) -> StepMeasurements:
    """Time every (runner, mode) case of the plan: median wall seconds of `repeats` steps
    (3 at most with `quick`). On a CPU one thread, each step timed on a quiet machine the way
    `torch_models.measure_call_s` does (reference kernels before and after, retries: 2 with
    `quick`, else 5); on cuda each step ends in a synchronise. `progress(done, total)` after
    each step; models are built once per runner (seeded)."""
    torch = _torch()
    from perfcast.measure import torch_models as tm

    dev = _device(plan, torch)
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[plan.dtype]
    repeats = min(repeats, 3) if quick else repeats
    baseline = tm.reference_s() if plan.device == "cpu" else None
    steps, built = [], {}
    for i, (runner, mode) in enumerate(plan.cases):
        if runner not in built:
            torch.manual_seed(seed)
            build = _hf_model if runner == "transformers" else _perfcast_model
            built = {runner: build(plan).to(dev, dtype)}  # one model held at a time
        fn = _step_fn(plan, runner, mode, built[runner], torch, dev, dtype, seed)
        grad = mode == "training"
        timed = (_time_cuda(fn, torch, repeats, grad) if baseline is None else
                 tm.measure_call_s(fn, baseline, repeats, attempts=2 if quick else 5,
                                   wait_s=0.5 if quick else 1.5, grad=grad))
        steps.append(StepMeasurement(
            mode=mode, runner=runner, batch=plan.batch,
            seq_len=None if plan.config is None else (1 if mode == "decode" else plan.seq_len),
            context=plan.context if mode == "decode" else None,
            optimizer=plan.optimizer if grad else None, measured_s=timed["seconds"],
            kernels=plan.kernels[mode], repeats=repeats, quiet=timed["quiet"],
            slowdown=timed["slowdown"],
            image_size=IMAGE_SIZE if plan.config is None else None))
        if progress is not None:
            progress(i + 1, len(plan.cases))
    return _measurements(plan, tuple(steps), torch, quick, seed)


def _host(plan: ModelStepPlan, torch: Any) -> tuple[str, str]:
    """(device name, host description) the steps ran on: local-cpu, or the GPU's catalog
    name (its raw name when the catalog lacks it)."""
    cpu = cpu_info()
    host = f"{cpu.model} ({cpu.logical_cpus} logical CPUs, {platform.system()})"
    if plan.device == "cpu":
        return CPU_DEVICE_NAME, f"{host}; 1 torch thread"
    raw = torch.cuda.get_device_name(0)
    try:  # the catalog's name, as the kernel rows carry it
        return get_device(raw).name, f"{host}; {raw}"
    except InputError:
        return raw, f"{host}; {raw}"


def _measurements(plan: ModelStepPlan, steps: tuple[StepMeasurement, ...], torch: Any,
                  quick: bool, seed: int) -> StepMeasurements:
    from perfcast import __version__

    hf = None
    if any(r == "transformers" for r, _ in plan.cases):
        import transformers
        hf = transformers.__version__
    device, host = _host(plan, torch)
    timing = ("median wall seconds of whole steps after 2 warm-up steps (1 when it takes "
              "over 0.25 s; none on a retry, the earlier attempt's steps warmed it), one "
              "torch thread, on a quiet machine (reference kernels within 8% of the run's "
              "start, thread CPU >= 93% of wall)" if plan.device == "cpu" else
              "median wall seconds of whole steps after 2 warm-up steps, each ended by "
              "torch.cuda.synchronize() (host dispatch and launch included)")
    provenance = {
        "command": "perfcast measure --model", "perfcast_version": __version__,
        "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "timing": timing, "quick": quick, "seed": seed,
        "op_tables": "perfcast.ops.cnn_ops" if plan.config is None else
        "perfcast.ops.eager_ops (the stack's attention, unfused, as `perfcast step`)",
        "training": "forward, backward of a fixed random logits gradient (the op table has "
                    "no loss kernels), optimizer step, zero_grad(set_to_none=True)",
        "decode": "one new token per sequence over `context` cached tokens; " + _CROP_NOTE,
        "kernels_skipped_ops": list(plan.skipped_ops),
    }
    config = None if plan.model_config is None else str(Path(plan.model_config).resolve())
    return StepMeasurements(
        schema_version=STEPS_SCHEMA_VERSION, model=plan.model, model_config=config,
        stack=plan.stack, attention=plan.attention, device=device, dtype=plan.dtype,
        host=host, torch=str(torch.__version__), transformers=hf, steps=steps,
        provenance=provenance)

