"""Number formats of weights, activations and KV cache, and the math dtype they imply."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, field_validator, model_validator

from perfcast.specs._dtype import DType

__all__ = ["Precision"]

_ACTIVATION_DTYPES = (DType.FP32, DType.FP16, DType.BF16, DType.FP8, DType.INT8, DType.FP4)
_HIGH = (DType.FP32, DType.FP16, DType.BF16)


class Precision(BaseModel):
    """Storage formats. Weight-only quantisation (int4/int8 weights, 16-bit activations) is
    expressed by a narrower `weights` than `activations`.

    `activation_quant` says where W8A8/W4A4 GEMMs get their narrow inputs: 'separate' —
    quantisation kernels of their own before each GEMM (what a per-GEMM benchmark times,
    e.g. AIConfigurator's FP8/NVFP4 tables); 'fused' — the producing norm or activation
    kernel writes the narrow copy (TensorRT-LLM's and vLLM's serving graphs, static or
    fused-dynamic scales), so neither the extra pass nor its launches run."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    weights: DType = DType.BF16
    activations: DType = DType.BF16
    kv_cache: DType = DType.BF16
    activation_quant: Literal["separate", "fused"] = "separate"

    @field_validator("activations")
    @classmethod
    def _activation_formats(cls, value: DType) -> DType:
        if value not in _ACTIVATION_DTYPES:
            allowed = ", ".join(d.value for d in _ACTIVATION_DTYPES)
            raise ValueError(f"activations cannot be {value.value} (allowed: {allowed})")
        return value

    @model_validator(mode="after")
    def _low_precision_pairs(self) -> Precision:
        low_act = self.activations not in _HIGH
        if low_act and self.weights != self.activations:
            raise ValueError(
                f"{self.activations.value} activations need {self.activations.value} weights "
                f"(got weights={self.weights.value})"
            )
        return self

    @classmethod
    def uniform(cls, dtype: DType | str, activation_quant: str = "separate") -> Precision:
        dtype = DType(dtype)
        return cls(weights=dtype, activations=dtype, kv_cache=dtype,
                   activation_quant=activation_quant)

    def weight_only_on(self, peak_dtypes: list[str]) -> tuple[Precision, str | None]:
        """This precision as a GPU without tensor cores for its narrow activations runs a
        checkpoint of it: weight-only (W8A16 / W4A16, 16-bit activations), as vLLM's Marlin
        and triton MXFP4 paths and TensorRT-LLM's weight-only GEMMs do; with a note saying so.
        Unchanged (note None) where the GPU has the peak or activations are 16/32-bit."""
        act = self.activations
        if act in _HIGH or act.value in peak_dtypes:
            return self, None
        note = (f"{act.value} weights run weight-only (W{act.value[-1]}A16, bf16 activations): "
                f"this GPU has no {act.value} tensor cores")
        return self.model_copy(update={"activations": DType.BF16}), note

    @property
    def fused_activation_quant(self) -> bool:
        """True when quantised-activation GEMMs take inputs quantised by their producer."""
        return self.activation_quant == "fused" and self.activations not in _HIGH

    @property
    def gemm_math(self) -> DType:
        """Tensor-core dtype of a weight GEMM: W8A8/W4A4 use the narrow roof; weight-only
        quantisation (W4A16) computes in the activation dtype."""
        return self.activations

    @property
    def vector_math(self) -> DType:
        """Dtype that elementwise, norm and activation kernels (and collectives) read and
        write: the activation dtype when 16/32-bit; bf16 under W8A8/W4A4, whose GEMMs quantise
        their inputs on the fly and write 16-bit outputs (TensorRT-LLM, vLLM FP8 paths)."""
        return self.activations if self.activations in _HIGH else DType.BF16

    @property
    def attention_math(self) -> DType:
        """Attention runs in 16-bit unless both activations and KV are fp8 (FA3-style fp8)."""
        if self.activations == DType.FP8 and self.kv_cache == DType.FP8:
            return DType.FP8
        return self.activations if self.activations in _HIGH else DType.BF16
