"""Accuracy of perfcast's forecasts against shipped real measurements."""

from perfcast.validate._calibration_check import (
    CALIBRATION_METHODS,
    CALIBRATION_SOURCES,
    calibration_report,
    summarise_calibration,
    validate_calibration,
)
from perfcast.validate._collectives import (
    COLLECTIVE_SPLITS,
    MULTI_NODE_METHOD,
    MULTI_NODE_POOLED,
    collective_table7,
    validate_collectives,
)
from perfcast.validate._gemm_baseline import gemm_baseline, gemm_ops, load_gemm_slice
from perfcast.validate._kernels import (
    TARGETS,
    KernelSplit,
    kernel_residuals,
    kernel_splits,
    summarise,
    validate_kernels,
)
from perfcast.validate._models import (
    MODEL_TARGET_MAPE,
    forecast_model_label,
    load_layer_op_labels,
    load_model_labels,
    validate_models,
)
from perfcast.validate._reports import (
    KERNEL_CHECK_SPLITS,
    ValidationReport,
    check_out_dir,
    collectives_report,
    coverage_lines,
    kernels_report,
    models_report,
    serving_report,
    training_report,
)
from perfcast.validate._serving import (
    SERVING_TARGETS,
    analytic_point,
    load_serving_points,
    point_precision,
    sample_serving_points,
    serving_residuals,
    validate_serving,
)
from perfcast.validate._serving_disagg import disagg_point, load_disagg_points
from perfcast.validate._serving_sim import engine_point
from perfcast.validate._serving_step import validate_serving_steps
from perfcast.validate._silicon import (
    SiliconDeployment,
    coverage_summary,
    load_silicon_rows,
    silicon_coverage,
    silicon_deployments,
)
from perfcast.validate._training import (
    TRAINING_METHODS,
    TRAINING_TARGET_MAPE,
    TRAINING_TARGET_UNDER,
    load_training_points,
    mosaicml_mfu,
    points_from_csv,
    roofline_point,
    training_job,
    training_point,
    training_residuals,
)
from perfcast.validate._training_calibration import (
    StackScaled,
    load_training_calibration,
    validate_training,
)

__all__ = [
    "CALIBRATION_METHODS", "CALIBRATION_SOURCES", "calibration_report",
    "summarise_calibration", "validate_calibration",
    "COLLECTIVE_SPLITS", "MULTI_NODE_METHOD", "MULTI_NODE_POOLED", "collective_table7",
    "validate_collectives",
    "MODEL_TARGET_MAPE", "SERVING_TARGETS", "TARGETS", "KernelSplit", "analytic_point",
    "disagg_point", "engine_point", "forecast_model_label", "gemm_baseline", "gemm_ops",
    "kernel_residuals", "kernel_splits", "load_disagg_points", "load_gemm_slice",
    "load_layer_op_labels", "load_model_labels",
    "load_serving_points", "point_precision", "sample_serving_points", "serving_residuals",
    "summarise", "validate_kernels", "validate_models", "validate_serving",
    "validate_serving_steps",
    "TRAINING_METHODS", "TRAINING_TARGET_MAPE", "TRAINING_TARGET_UNDER", "StackScaled",
    "load_training_calibration",
    "load_training_points", "mosaicml_mfu", "points_from_csv", "roofline_point",
    "training_job", "training_point", "training_residuals", "validate_training",
    "KERNEL_CHECK_SPLITS", "ValidationReport", "check_out_dir", "collectives_report",
    "kernels_report", "models_report", "serving_report", "training_report",
    "SiliconDeployment", "coverage_lines", "coverage_summary", "load_silicon_rows",
    "silicon_coverage", "silicon_deployments",
]
