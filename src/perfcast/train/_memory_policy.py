"""Which dtypes a training run keeps its model states in: parameters, gradients, master
weights and Adam's two moments, and whether the optimizer state is sharded over data
parallelism (Megatron-LM's distributed optimizer).

Bytes per trainable parameter (Rajbhandari et al. 2020, ZeRO, section 3.1):
  amp             16-bit params + grads, fp32 master + fp32 Adam m, v: 2 + 2 + 4 + 8 = 16 B
                  (Megatron mixed precision; ZeRO's K = 12). The 16-bit dtype is the run's
                  compute dtype; an fp32 run keeps no separate master copy: 4 + 4 + 8 = 16 B.
                  This is the default, and exactly what perfcast assumed before policies.
  amp-distributed amp with master + moments sharded over dp (Megatron
                  --use-distributed-optimizer, ZeRO-1's memory even at --zero 0)
  pure-bf16       bf16 params, grads and Adam moments, no master: 2 + 2 + 4 = 8 B
  fp32            fp32 params, grads and moments: 4 + 4 + 8 = 16 B
  torch-amp       torch.autocast over fp32 params (HF Trainer's bf16=True): fp32's 16 B plus
                  the 16-bit copy of each weight autocast caches for the step, 2 B; the eager
                  graph then casts weights and inputs and keeps an fp32 residual stream
                  (perfcast.ops.eager_ops(autocast=True))
FP8 GEMMs add a 1 B fp8 weight copy (Transformer Engine) whatever the policy. A software stack
carries a preset by name (`memory_policy(name)`), so it can choose the default.
"""

from __future__ import annotations

from dataclasses import dataclass

from perfcast.errors import InputError
from perfcast.ops._training import ADAM_READ_BYTES_PER_PARAM, ADAM_WRITE_BYTES_PER_PARAM
from perfcast.specs import DType, Precision, bytes_per_element

__all__ = ["DEFAULT_MEMORY_POLICY", "MEMORY_POLICIES", "TrainingMemoryPolicy",
           "memory_policy"]

ADAM_MOMENTS = 2  # m and v


@dataclass(frozen=True)
class TrainingMemoryPolicy:
    """Model-state dtypes of a training run (module docstring). `param_dtype`/`grad_dtype`
    None: the run's compute dtype (Precision.vector_math); `master_dtype` None: no master
    copy (also dropped when it is no wider than the parameters)."""

    name: str
    param_dtype: DType | None
    grad_dtype: DType | None
    master_dtype: DType | None
    optimizer_state_dtype: DType
    distributed_optimizer: bool = False
    autocast: bool = False  # fp32 parameters under torch.autocast to the compute dtype

    def check(self, precision: Precision) -> None:
        """Parameters narrower than the compute dtype cannot feed its kernels unconverted:
        refused (e.g. pure-bf16 with an fp32 run)."""
        compute = precision.vector_math
        param = self.param_dtype or compute
        if bytes_per_element(param) < bytes_per_element(compute):
            raise InputError("memory_policy", f"{self.name} keeps {param.value} parameters, "
                             f"narrower than the run's {compute.value} compute dtype",
                             [n for n, p in MEMORY_POLICIES.items()
                              if bytes_per_element(p.param_dtype or compute)
                              >= bytes_per_element(compute)])

    def bytes_per_param(self, precision: Precision) -> dict[str, float]:
        """Bytes per trainable parameter by kind: 'weights' (and 'frozen_weights', a LoRA
        base), 'gradients', 'optimizer' (master + moments), 'gathered' (what a ZeRO-3
        parameter all-gather moves: the compute copy), and what one Adam step reads and
        writes ('adam_read', 'adam_write': with no master copy, pure-bf16 reads and writes
        half of amp's bytes)."""
        compute = precision.vector_math
        param_dtype = self.param_dtype or compute
        param = bytes_per_element(param_dtype)
        fp8_copy = 1.0 if precision.gemm_math == DType.FP8 else 0.0
        master = (bytes_per_element(self.master_dtype)
                  if self.master_dtype is not None else 0.0)
        master = master if master > param else 0.0
        moments = ADAM_MOMENTS * bytes_per_element(self.optimizer_state_dtype)
        grad = bytes_per_element(self.grad_dtype or compute)
        cache = bytes_per_element(compute) if self.autocast and compute != param_dtype else 0.0
        if master:  # Megatron-style: fp32 master, main grad and moments; the 16-bit copy written
            read, write = ADAM_READ_BYTES_PER_PARAM, ADAM_WRITE_BYTES_PER_PARAM
        else:  # the update reads and writes the parameters and moments in place
            read, write = param + grad + moments, param + moments
        return {"weights": param + cache + fp8_copy, "frozen_weights": param + cache + fp8_copy,
                "gradients": grad, "optimizer": master + moments,
                "gathered": bytes_per_element(compute),
                "adam_read": float(read), "adam_write": float(write)}


MEMORY_POLICIES: dict[str, TrainingMemoryPolicy] = {
    "amp": TrainingMemoryPolicy("amp", None, None, DType.FP32, DType.FP32),
    "amp-distributed": TrainingMemoryPolicy("amp-distributed", None, None, DType.FP32,
                                            DType.FP32, distributed_optimizer=True),
    "pure-bf16": TrainingMemoryPolicy("pure-bf16", DType.BF16, DType.BF16, None, DType.BF16),
    "fp32": TrainingMemoryPolicy("fp32", DType.FP32, DType.FP32, None, DType.FP32),
    "torch-amp": TrainingMemoryPolicy("torch-amp", DType.FP32, DType.FP32, None, DType.FP32,
                                      autocast=True),
}
DEFAULT_MEMORY_POLICY = "amp"


def memory_policy(name: str | TrainingMemoryPolicy | None) -> TrainingMemoryPolicy:
    """The preset named `name` (None: the default, amp); an InputError naming the field and
    the presets otherwise."""
    if isinstance(name, TrainingMemoryPolicy):
        return name
    key = DEFAULT_MEMORY_POLICY if name is None else str(name).strip().lower()
    if key not in MEMORY_POLICIES:
        raise InputError("memory_policy", f"unknown memory policy {name!r}",
                         list(MEMORY_POLICIES))
    return MEMORY_POLICIES[key]
