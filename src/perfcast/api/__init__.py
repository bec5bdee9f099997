"""perfcast's application layer: one typed request per question, one `run`.

    from perfcast.api import InferRequest, run
    result = run(InferRequest(model="llama-2-7b", hardware="h100-sxm"))
    result.forecast.ttft_s, result.payload()   # rich objects, and what `--json` prints

Every face (CLI, suite, sweep, capacity, UI, plots, validate) builds a request and calls
`run`; `resolve` is the one place names and flags become specs and defaults are chosen.

Names load on first use (PEP 562): `from perfcast.api import ServeRequest` imports api._serve
and the layers it needs, not every command's (pandas, scipy.optimize, ...), so a command
starts in a fraction of the time. A command looked up by name (`command_for`, `run_options`,
`load_request`) imports its own module; `COMMANDS` imports every command module first.
"""

from perfcast import _lazy_exports

# Submodule -> the public names it provides.
_EXPORTS = {
    "_accel": ("AccelMapper", "AccelModelResult", "AccelOutputs", "AccelRequest",
        "AccelWorkload", "ResolvedAccel"),
    "_base": ("COMMANDS", "COMMAND_NAMES", "Command", "Group", "Request", "Result", "command_for",
        "dump_request", "load_request", "request_from_options", "resolve", "run", "run_options"),
    "_calibrate": ("CalibrateInputs", "CalibrateOutputs", "CalibrateRequest", "CalibrateResult",
        "ResolvedCalibrate"),
    "_capacity": ("CapacityCandidates", "CapacityProbes", "CapacityRequest", "CapacityResult",
        "CapacityTarget", "Parallelism", "ResolvedCapacity"),
    "_choices": ("EngineStackChoice", "Hardware", "KernelChoice", "ModelChoice",
        "PrecisionChoice", "ServingPrecision", "StackChoice", "default_stack", "kernel_model",
        "machines_for"),
    "_collective": ("CollectiveHardware", "CollectiveRequest", "CollectiveResult",
        "ResolvedCollective"),
    "_cpu": ("CpuMeasurement", "CpuRequest", "CpuResult", "CpuWorkload", "ResolvedCpu"),
    "_diffusion": ("DiffusionImage", "DiffusionRequest", "DiffusionResult", "DiffusionSampler",
        "ResolvedDiffusion"),
    "_infer": ("InferEngine", "InferPlan", "InferRequest", "InferResult", "InferWorkload",
        "ResolvedInfer"),
    "_network": ("NetworkOptions",),
    "_measure": ("MeasureModel", "MeasureOutputs", "MeasureRequest", "MeasureResult",
        "MeasureSweep", "MeasureTarget", "ResolvedMeasure"),
    "_rag": ("RagEngine", "RagIndex", "RagModels", "RagPlan", "RagRequest", "RagResult",
        "RagWorkload", "ResolvedRag"),
    "_selfcheck": ("SelfCheckOutputs", "SelfCheckRequest", "SelfCheckResult",
        "SelfCheckWorkload"),
    "_serve": ("QUANT_SCHEMES", "Colocation", "Disaggregation", "PoolLayout", "ResolvedServe",
        "ServeDeployment", "ServeEngine", "ServeModel", "ServeOutputs", "ServeQuantisation",
        "ServeRequest", "ServeResult", "ServeSlos", "ServeWorkload", "SpeculativeDecoding"),
    "_step": ("ResolvedStep", "StepEngine", "StepHardware", "StepOutputs", "StepPlan",
        "StepPrecision", "StepRequest", "StepResult", "StepWorkload"),
    "_train": ("CNNTrainResult", "PlanSearch", "ResolvedCNNTrain", "ResolvedRLHF",
        "ResolvedTrain", "ResolvedTrainSweep", "RLHFOptions", "RLHFResult", "TrainKernels",
        "TrainOutputs", "TrainPlan", "TrainRecipe", "TrainRequest", "TrainResult",
        "TrainSweepResult", "TrainWorkload"),
}
_load, __dir__ = _lazy_exports(__name__, _EXPORTS)


def __getattr__(name: str):
    if name == "COMMANDS":  # the whole table: every command module registers its command
        from perfcast.api._base import all_commands
        all_commands()
    return _load(name)


__all__ = [name for names in _EXPORTS.values() for name in names]  # pinned: tests
