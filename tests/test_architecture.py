"""The package's shape: small public surfaces, and lower layers never import higher ones."""

import ast
import importlib
import types
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "perfcast"

# Layer rank per DESIGN.md: a module may import only its own or lower-ranked packages.
# `api` is the application layer: the model layers below it, the faces (validate, suite,
# sweep, cli, ui) above it, each building requests and calling `api.run`.
RANK = {"errors": 0, "progress": 0, "specs": 1, "ops": 2, "kernels": 3, "comm": 3, "accel": 3,
        "compose": 4, "measure": 4, "serve": 5, "train": 5, "report": 6, "api": 7, "validate": 8,
        "suite": 8, "sweep": 9, "cli": 10, "ui": 11}

PUBLIC = {
    "perfcast.progress": {"ProgressFn", "claimed", "current", "offset", "reporting"},
    "perfcast.ui": {
        "APP_PATH", "MAX_SWEEP_POINTS", "TASKS", "Forecast", "breakdown_frame", "build_options",
        "cdf_frame", "cli_line", "flatten_scenario", "forecast", "headline", "latency_frame",
        "memory_frame", "parse_values", "run_grid", "scenario", "scenario_yaml", "sweep_frame",
        "sweep_points"},
    "perfcast.sweep": {
        "BACKENDS", "PARTS_DIR", "RESULTS_FILE", "Slo", "bisect_max", "capacity_search",
        "choose_backend", "evaluate_point", "expand_grid", "flatten_payload", "gpu_prices",
        "parse_assignment", "parse_prices", "parse_scalar", "point_key",
        "qps_ladder", "run_sweep", "search_candidate"},
    "perfcast.suite": {
        "MAX_SCENARIO_BYTES", "SECTIONS", "STATUSES", "Execute", "Scenario", "ScenarioResult",
        "Target", "TargetValue", "builtin_scenarios", "format_value", "grade", "load_scenario",
        "parse_scenario", "run_scenario", "run_suite", "suite_markdown", "suite_summary"},
    "perfcast.specs": {
        "AttentionBackend", "BatchTier", "Cluster", "DType", "Device", "DiffusionPipelineSpec",
        "EngineDefaults", "GraphCapture", "HostModel", "KVBudget", "Link", "LinkKind",
        "LinearMixerSpec", "MLASpec",
        "MoESpec", "SparseAttentionSpec",
        "ModelSpec", "ParallelPlan", "PipelineSchedule", "Precision", "Stack",
        "TextEncoderConfig", "UNetConfig", "VAEConfig", "VisionSpec",
        "bytes_per_element", "cluster_for", "cluster_names", "cuda_total_bytes",
        "device_names", "diffusion_model_entries", "diffusion_model_names", "get_cluster",
        "get_device",
        "get_diffusion_model", "get_model", "get_stack", "load_model_config",
        "model_entries", "model_names", "parse_dtype", "physical_memory_bytes",
        "stack_names"},
    "perfcast.ops": {
        "Batch", "CNN_MODELS", "COLUMNS", "COMM_FAMILIES", "EAGER_ATTENTION",
        "EAGER_LOGITS", "EAGER_MODES", "FUSED_QUANT", "FUSION_RULES", "INDEX_KINDS",
        "MemoryFootprint", "OPTIMIZERS", "OpRows", "TENSOR_FAMILIES", "VectorIndex",
        "attended_keys", "cnn_ops", "eager_batch_ops", "eager_ops", "embed_ops",
        "inference_memory", "kv_bytes_per_token", "layer_name", "loss_peak_bytes_per_logit",
        "loss_rows", "scheduler_ops",
        "search_ops",
        "state_bytes_per_sequence",
        "step_ops", "step_rows", "text_encoder_ops", "training_ops", "unet_ops",
        "vae_decode_ops", "weight_bytes_per_gpu", "weight_params"},
    "perfcast.kernels": {
        "CROSS_GENERATION", "Calibration", "DeviceResidual", "EfficiencyModel",
        "ExecutionTimeModel", "ExpertLoad", "KERNEL_FAMILIES", "KERNEL_SOURCES", "KernelSource",
        "LEARNED", "LearnedKernels", "LearnedTimeModel", "NotedTimeModel", "PhysicsModel",
        "RooflineModel", "SCHEMA_VERSION", "StackTimeModel", "TARGET_MEASURED",
        "UNCERTAINTY_TIERS", "UNMODELLED_FAMILIES", "UnitEfficiency",
        "add_learned_targets", "add_target_corrections", "calibration_devices",
        "learned_target_tier",
        "default_time_model", "devices_by_family", "expert_load", "family_provenance",
        "family_uncertainty", "fit_calibration", "fit_learned", "kernel_features",
        "kernel_source", "learned_time_model", "measurement_ops", "model_notes",
        "peak_flops", "roofline_times", "shipped_calibration", "shipped_learned",
        "source_time_model", "stack_families", "stack_kernel_model", "step_interval",
        "thread_blocks", "wave_quantization"},
    "perfcast.measure": {
        "ModelStepPlan", "StepMeasurement", "StepMeasurements", "load_steps", "plan_model_steps",
        "run_model_steps",
        "STORE_COLUMNS", "TIMING_METHODS", "TORCH_OPS", "SweepInterrupted", "check_measurements",
        "load_store", "local_cpu_device", "measure_torch_dispatch_s", "query", "run_cpu_sweep",
        "run_gpu_sweep", "run_torch_cpu_sweep", "sample_per_group", "sample_positions",
        "time_torch_call", "to_ops",
        "torch_sweep_shapes", "with_achieved_peak",
        "CaseTiming", "DeviceBackend", "FakeDeviceBackend", "KernelCase", "estimate_sweep_s",
        "kernel_cases", "measure_launch_s", "run_collective_sweep", "run_torch_sweep",
        "time_case"},
    "perfcast.comm": {"COLLECTIVES", "CollectiveModel", "CustomAllReduce", "RingAlphaBeta",
                      "ring_traffic_factor",
                      "ALGORITHMS", "LinkFit", "NcclModel", "algorithm_choice",
                      "bus_bandwidth_factor", "default_collective_model", "fit_link", "fit_p2p",
                      "network_from_sendrecv", "nvls_note", "one_shot_times",
                      "shipped_link_fits"},
    "perfcast.compose": {
        "BatchStats", "ServingStepModel",
        "DDP_BUCKET_BYTES", "EAGER_DISPATCH_S", "HOST_PROFILES", "Execution",
        "InferenceForecast", "ParallelStep", "StepForecast", "chrome_trace",
        "data_parallel_step", "forecast_inference", "host_overhead_s", "kernel_sequence",
        "model_tier", "pipeline_step", "step_time", "step_timeline", "fuse_cnn_kernels",
        "DIFFUSION_DTYPES", "DiffusionForecast", "forecast_diffusion", "vae_dtype",
        "RAGForecast", "forecast_rag",
        "TRAINING_EXECUTION", "EagerGraph", "TieredTimeModel", "bucketed_reduction",
        "group_collective",
        "group_view", "reduction_end", "step_times", "training_execution", "training_step",
        "training_step_ops"},
    "perfcast.validate": {
        "validate_serving_steps", "SiliconDeployment", "coverage_lines", "coverage_summary",
        "load_silicon_rows", "silicon_coverage", "silicon_deployments",
        "CALIBRATION_METHODS", "CALIBRATION_SOURCES", "calibration_report",
        "summarise_calibration", "validate_calibration",
        "KERNEL_CHECK_SPLITS", "ValidationReport", "check_out_dir", "collectives_report",
        "kernels_report", "models_report", "serving_report", "training_report",
        "COLLECTIVE_SPLITS", "MULTI_NODE_METHOD", "MULTI_NODE_POOLED", "collective_table7",
        "validate_collectives",
        "disagg_point", "load_disagg_points",
        "MODEL_TARGET_MAPE", "TARGETS", "KernelSplit", "forecast_model_label", "gemm_baseline",
        "gemm_ops", "kernel_residuals", "kernel_splits", "load_gemm_slice",
        "load_layer_op_labels", "load_model_labels", "summarise", "validate_kernels",
        "validate_models", "SERVING_TARGETS", "analytic_point", "engine_point",
        "load_serving_points", "point_precision", "sample_serving_points", "serving_residuals",
        "validate_serving", "TRAINING_METHODS", "TRAINING_TARGET_MAPE", "TRAINING_TARGET_UNDER",
        "StackScaled",
        "load_training_calibration", "load_training_points", "mosaicml_mfu",
        "points_from_csv", "roofline_point", "training_job", "training_point",
        "training_residuals", "validate_training"},
    "perfcast.serve": {
        "ARRIVALS", "LENGTHS", "ROUTERS", "SCHEDULERS", "DisaggResult", "MemoryPlan",
        "ServeConfig", "ServeResult", "Workload", "make_workload", "plan_memory", "simulate",
        "simulate_colocated", "simulate_disaggregated", "step_model_for",
        "StatsStepTimeModel", "StepTimeModel"},
    "perfcast.train": {
        "ATTENTION_FAMILIES", "CNNTrainForecast", "DEFAULT_MEMORY_POLICY",
        "FLOP_CONVENTION", "MEMORY_POLICIES", "MemoryBudget", "PipelineTasks", "RECOMPUTE",
        "RLHFForecast", "STACKS", "SWEEP_COLUMNS", "StackScaled", "TrainForecast",
        "TrainJob", "TrainingMemoryPolicy", "activation_bytes_per_layer",
        "build_schedule", "cnn_training_ops", "default_time_model", "eager_step_memory",
        "forecast_cnn_training", "forecast_training", "load_stack", "memory_policy",
        "mfu_ceiling", "SCALE_PARTS", "ScaleEffects", "CommOverlap", "ITERATION_PARTS",
        "LEGACY_ATTENTION", "OVERLAP_PARTS", "attention_penalty", "iteration_parts",
        "stack_overlap",
        "pipeline_tasks", "rlhf_step", "simulate", "stack_time_model",
        "state_bytes_per_param", "sweep_plans", "training_precision"},
    "perfcast.accel": {
        "DATAFLOWS", "DIMS", "MODELS", "OBJECTIVES", "TENSORS", "AccelResult", "ArchSpec",
        "Level", "LevelMapping", "Mapping", "Problem", "arch_names", "conv_problem",
        "default_mapping", "evaluate_mapping", "gemm_problem", "get_arch", "load_arch_yaml",
        "map_layers", "model_problems", "model_totals", "onnx_problems", "search_mapping"},
    "perfcast.report": {
        "FIGURE_FORMATS", "TrainSchedule", "breakdown_figure", "breakdown_table", "cdf_figure",
        "empirical_cdf", "memory_figure", "memory_table", "pareto_figure", "pareto_front",
        "pipeline_figure", "roofline_ceilings", "roofline_figure", "roofline_points",
        "save_figure", "throughput_latency_figure", "training_schedule", "training_trace"},
    "perfcast.api": {
        "AccelMapper", "AccelModelResult", "AccelOutputs", "AccelRequest",
        "AccelWorkload", "CNNTrainResult", "COMMANDS", "COMMAND_NAMES", "CalibrateInputs",
        "CalibrateOutputs", "CalibrateRequest", "CalibrateResult", "CapacityCandidates",
        "CapacityProbes", "CapacityRequest", "CapacityResult", "CapacityTarget",
        "CollectiveHardware", "CollectiveRequest", "CollectiveResult", "Colocation",
        "Command", "CpuMeasurement", "CpuRequest", "CpuResult", "CpuWorkload",
        "DiffusionImage", "DiffusionRequest", "DiffusionResult", "DiffusionSampler",
        "Disaggregation", "EngineStackChoice", "Group", "Hardware", "InferEngine",
        "InferPlan", "InferRequest", "InferResult", "InferWorkload", "KernelChoice",
        "SelfCheckOutputs", "SelfCheckRequest", "SelfCheckResult", "SelfCheckWorkload",
        "MeasureModel", "MeasureOutputs", "MeasureRequest", "MeasureResult", "MeasureSweep",
        "MeasureTarget", "ModelChoice", "NetworkOptions", "Parallelism", "PlanSearch",
        "PrecisionChoice",
        "RLHFOptions", "RLHFResult", "RagEngine", "RagIndex", "RagModels", "RagPlan",
        "RagRequest", "RagResult", "RagWorkload", "Request", "ResolvedAccel",
        "ResolvedCNNTrain", "ResolvedCalibrate", "ResolvedCapacity",
        "ResolvedCollective", "ResolvedCpu", "ResolvedDiffusion", "ResolvedInfer",
        "ResolvedMeasure", "ResolvedRLHF", "ResolvedRag", "ResolvedServe",
        "ResolvedStep", "ResolvedTrain", "ResolvedTrainSweep", "Result",
        "ServeDeployment", "ServeEngine", "ServeModel", "ServeOutputs", "ServeRequest",
        "ServeQuantisation", "PoolLayout", "QUANT_SCHEMES",
        "ServeResult", "ServeSlos", "ServeWorkload", "ServingPrecision",
        "SpeculativeDecoding", "StackChoice", "StepEngine", "StepHardware",
        "StepOutputs", "StepPlan", "StepPrecision", "StepRequest", "StepResult",
        "StepWorkload", "TrainKernels", "TrainOutputs", "TrainPlan", "TrainRecipe",
        "TrainRequest", "TrainResult", "TrainSweepResult", "TrainWorkload",
        "command_for", "default_stack", "dump_request", "kernel_model", "load_request",
        "machines_for", "request_from_options", "resolve", "run", "run_options"},
    "perfcast.cli": {"app", "main"},
}


@pytest.mark.parametrize("package", sorted(PUBLIC))
def test_public_surface_is_pinned(package):
    module = importlib.import_module(package)
    assert set(module.__all__) == PUBLIC[package]
    for name in module.__all__:
        assert hasattr(module, name)


@pytest.mark.parametrize("package", sorted(set(PUBLIC) - {"perfcast.cli"}))
def test_every_public_name_is_exported(package):
    """httpx's rule: a package's public attributes are exactly its `__all__` (a name imported
    for internal use is underscored), so the pin above is the whole surface."""
    module = importlib.import_module(package)
    # dir(), not vars(): a package's names load lazily (PEP 562 `__getattr__`/`__dir__`),
    # so vars() holds only those used so far
    public = {name for name in dir(module) if not name.startswith("_")
              and not isinstance(getattr(module, name), types.ModuleType)
              and name != "annotations"}
    assert public == set(module.__all__)


def _imported_layers(path: Path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module]
        for name in names:
            parts = name.split(".")
            if parts[0] == "perfcast" and len(parts) > 1:
                yield parts[1]


@pytest.mark.parametrize("path", sorted(SRC.rglob("*.py")), ids=lambda p: str(p.relative_to(SRC)))
def test_lower_layers_never_import_higher_ones(path):
    rel = path.relative_to(SRC).parts
    own = rel[0].removesuffix(".py") if len(rel) > 1 or rel[0] == "errors.py" else None
    if own not in RANK:
        return
    for layer in _imported_layers(path):
        if layer in RANK and layer != own:
            assert RANK[layer] < RANK[own] or own == "cli", f"{path} imports perfcast.{layer}"


def test_every_package_is_ranked():
    packages = {p.name for p in SRC.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert packages <= set(RANK)


def test_test_modules_have_unique_names():
    """pytest imports test files by basename (no packages under tests/): two files of one
    name break collection of the second."""
    names = [p.name for p in (SRC.parents[1] / "tests").rglob("test_*.py")]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)
