"""Numeric formats: their names and storage sizes."""

from __future__ import annotations

from enum import StrEnum

__all__ = ["DType", "bytes_per_element", "parse_dtype"]


class DType(StrEnum):
    """A number format as a kernel stores or computes it."""

    FP32 = "fp32"
    TF32 = "tf32"
    FP16 = "fp16"
    BF16 = "bf16"
    FP8 = "fp8"
    INT8 = "int8"
    INT4 = "int4"
    FP4 = "fp4"


_BYTES = {
    DType.FP32: 4.0,
    DType.TF32: 4.0,  # stored as fp32; tf32 only changes the tensor-core math
    DType.FP16: 2.0,
    DType.BF16: 2.0,
    DType.FP8: 1.0,
    DType.INT8: 1.0,
    DType.INT4: 0.5,
    DType.FP4: 0.5,
}

_ALIASES = {
    "float32": DType.FP32, "float": DType.FP32, "float16": DType.FP16, "half": DType.FP16,
    "bfloat16": DType.BF16, "fp8_e4m3": DType.FP8, "e4m3": DType.FP8, "float8": DType.FP8,
    "nvfp4": DType.FP4, "mxfp4": DType.FP4, "w4": DType.INT4,
}


def bytes_per_element(dtype: DType | str) -> float:
    """Storage bytes of one element (scales and zero points of block formats excluded)."""
    return _BYTES[DType(dtype)]


def parse_dtype(value: str | DType, field: str = "dtype") -> DType:
    """A DType from a user string, or an InputError naming the field and allowed values."""
    from perfcast.errors import InputError

    if isinstance(value, DType):
        return value
    key = str(value).strip().lower()
    if key in _ALIASES:
        return _ALIASES[key]
    try:
        return DType(key)
    except ValueError:
        raise InputError(field, f"unknown dtype {value!r}", [d.value for d in DType]) from None
