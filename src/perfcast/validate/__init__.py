"""Accuracy of perfcast's forecasts against shipped real measurements.

Names load on first use (PEP 562): `validate --help` and one check load none of the others'
data and models."""

from perfcast import _lazy_exports

# Submodule -> the public names it provides, each imported on first use.
_EXPORTS = {
    "_calibration_check": ("CALIBRATION_METHODS", "CALIBRATION_SOURCES", "calibration_report",
        "summarise_calibration", "validate_calibration"),
    "_collectives": ("COLLECTIVE_SPLITS", "MULTI_NODE_METHOD", "MULTI_NODE_POOLED",
        "collective_table7", "validate_collectives"),
    "_gemm_baseline": ("gemm_baseline", "gemm_ops", "load_gemm_slice"),
    "_kernels": ("TARGETS", "KernelSplit", "kernel_residuals", "kernel_splits", "summarise",
        "validate_kernels"),
    "_models": ("MODEL_TARGET_MAPE", "forecast_model_label", "load_layer_op_labels",
        "load_model_labels", "validate_models"),
    "_options": ("KERNEL_CHECK_SPLITS",),
    "_reports": ("ValidationReport", "check_out_dir", "collectives_report",
        "coverage_lines", "kernels_report", "models_report", "serving_report", "training_report"),
    "_serving": ("SERVING_TARGETS", "analytic_point", "load_serving_points", "point_precision",
        "sample_serving_points", "serving_residuals", "validate_serving"),
    "_serving_disagg": ("disagg_point", "load_disagg_points"),
    "_serving_sim": ("engine_point",),
    "_serving_step": ("validate_serving_steps",),
    "_silicon": ("SiliconDeployment", "coverage_summary", "load_silicon_rows", "silicon_coverage",
        "silicon_deployments"),
    "_training": ("TRAINING_METHODS", "TRAINING_TARGET_MAPE", "TRAINING_TARGET_UNDER",
        "load_training_points", "mosaicml_mfu", "points_from_csv", "roofline_point",
        "training_job", "training_point", "training_residuals"),
    "_training_calibration": ("StackScaled", "load_training_calibration", "validate_training"),
}
__getattr__, __dir__ = _lazy_exports(__name__, _EXPORTS)

__all__ = [name for names in _EXPORTS.values() for name in names]  # pinned: tests
