"""The allowed values of `perfcast validate`'s options, apart from the checks that use them,
so that the command line can name them in its help without loading any check."""

from __future__ import annotations

__all__ = ["DISAGG_METHODS", "KERNEL_BY", "KERNEL_CHECK_SPLITS", "SERVING_ARCHS",
           "SERVING_METHODS", "TRAINING_BY", "TRAINING_SPLITS"]

KERNEL_CHECK_SPLITS = ["generation", "neusight", "loo:aiconfigurator", "loo:neusight",
                       "loo:vidur"]
KERNEL_BY = ("family", "dtype", "stack")
SERVING_METHODS = ("perfcast", "sum_of_kernels", "roofline")
DISAGG_METHODS = ("perfcast", "roofline")
SERVING_ARCHS = ("dense", "moe", "all")
TRAINING_BY = {"device": "metric", "scale": "scale", "model": "model"}
TRAINING_SPLITS = ("all", "heldout_device", "heldout_model")
