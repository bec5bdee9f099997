"""perfcast's application layer: one typed request per question, one `run`.

    from perfcast.api import InferRequest, run
    result = run(InferRequest(model="llama-2-7b", hardware="h100-sxm"))
    result.forecast.ttft_s, result.payload()   # rich objects, and what `--json` prints

Every face (CLI, suite, sweep, capacity, UI, plots, validate) builds a request and calls
`run`; `resolve` is the one place names and flags become specs and defaults are chosen.
"""

from perfcast.api._accel import (
    AccelMapper,
    AccelModelResult,
    AccelOutputs,
    AccelRequest,
    AccelWorkload,
    ResolvedAccel,
)
from perfcast.api._base import (
    COMMANDS,
    Command,
    Group,
    Request,
    Result,
    command_for,
    dump_request,
    load_request,
    request_from_options,
    resolve,
    run,
    run_options,
)
from perfcast.api._calibrate import (
    CalibrateInputs,
    CalibrateOutputs,
    CalibrateRequest,
    CalibrateResult,
    ResolvedCalibrate,
)
from perfcast.api._capacity import (
    CapacityCandidates,
    CapacityProbes,
    CapacityRequest,
    CapacityResult,
    CapacityTarget,
    Parallelism,
    ResolvedCapacity,
)
from perfcast.api._choices import (
    EngineStackChoice,
    Hardware,
    KernelChoice,
    ModelChoice,
    PrecisionChoice,
    ServingPrecision,
    StackChoice,
    default_stack,
    kernel_model,
    machines_for,
)
from perfcast.api._collective import (
    CollectiveHardware,
    CollectiveRequest,
    CollectiveResult,
    ResolvedCollective,
)
from perfcast.api._cpu import CpuMeasurement, CpuRequest, CpuResult, CpuWorkload, ResolvedCpu
from perfcast.api._diffusion import (
    DiffusionImage,
    DiffusionRequest,
    DiffusionResult,
    DiffusionSampler,
    ResolvedDiffusion,
)
from perfcast.api._infer import (
    InferEngine,
    InferPlan,
    InferRequest,
    InferResult,
    InferWorkload,
    ResolvedInfer,
)
from perfcast.api._measure import (
    MeasureModel,
    MeasureOutputs,
    MeasureRequest,
    MeasureResult,
    MeasureSweep,
    MeasureTarget,
    ResolvedMeasure,
)
from perfcast.api._rag import (
    RagEngine,
    RagIndex,
    RagModels,
    RagPlan,
    RagRequest,
    RagResult,
    RagWorkload,
    ResolvedRag,
)
from perfcast.api._selfcheck import (
    SelfCheckOutputs,
    SelfCheckRequest,
    SelfCheckResult,
    SelfCheckWorkload,
)
from perfcast.api._serve import (
    QUANT_SCHEMES,
    Colocation,
    Disaggregation,
    PoolLayout,
    ResolvedServe,
    ServeDeployment,
    ServeEngine,
    ServeModel,
    ServeOutputs,
    ServeQuantisation,
    ServeRequest,
    ServeResult,
    ServeSlos,
    ServeWorkload,
    SpeculativeDecoding,
)
from perfcast.api._step import (
    ResolvedStep,
    StepEngine,
    StepHardware,
    StepOutputs,
    StepPlan,
    StepPrecision,
    StepRequest,
    StepResult,
    StepWorkload,
)
from perfcast.api._train import (
    CNNTrainResult,
    PlanSearch,
    ResolvedCNNTrain,
    ResolvedRLHF,
    ResolvedTrain,
    ResolvedTrainSweep,
    RLHFOptions,
    RLHFResult,
    TrainKernels,
    TrainOutputs,
    TrainPlan,
    TrainRecipe,
    TrainRequest,
    TrainResult,
    TrainSweepResult,
    TrainWorkload,
)

__all__ = [
    "COMMANDS", "Command", "Group", "Hardware", "InferEngine", "InferPlan", "InferRequest",
    "InferResult", "InferWorkload", "KernelChoice", "ModelChoice", "PrecisionChoice", "Request",
    "EngineStackChoice", "StackChoice", "default_stack",
    "ResolvedInfer", "Result", "ServingPrecision", "command_for", "dump_request",
    "kernel_model", "load_request", "machines_for", "request_from_options", "resolve", "run",
    "run_options",
    "ResolvedStep", "StepEngine", "StepHardware", "StepOutputs", "StepPlan", "StepPrecision",
    "StepRequest", "StepResult", "StepWorkload",
    "AccelMapper", "AccelModelResult", "AccelOutputs", "AccelRequest", "AccelWorkload",
    "CollectiveHardware", "CollectiveRequest", "CollectiveResult", "CpuMeasurement",
    "SelfCheckOutputs", "SelfCheckRequest", "SelfCheckResult", "SelfCheckWorkload",
    "CpuRequest", "CpuResult", "CpuWorkload", "DiffusionImage", "DiffusionRequest",
    "DiffusionResult", "DiffusionSampler", "RagEngine", "RagIndex", "RagModels", "RagPlan",
    "RagRequest", "RagResult", "RagWorkload", "ResolvedAccel", "ResolvedCollective",
    "ResolvedCpu", "ResolvedDiffusion", "ResolvedRag",
    "CapacityCandidates", "CapacityProbes", "CapacityRequest", "CapacityResult",
    "CapacityTarget", "Colocation", "Disaggregation", "Parallelism", "ResolvedCapacity",
    "ResolvedServe", "ServeDeployment", "ServeEngine", "ServeModel", "ServeOutputs",
    "ServeQuantisation", "PoolLayout", "QUANT_SCHEMES",
    "ServeRequest", "ServeResult", "ServeSlos", "ServeWorkload", "SpeculativeDecoding",
    "CNNTrainResult", "PlanSearch", "RLHFOptions", "RLHFResult", "ResolvedCNNTrain",
    "ResolvedRLHF", "ResolvedTrain", "ResolvedTrainSweep", "TrainKernels", "TrainOutputs",
    "TrainPlan", "TrainRecipe", "TrainRequest", "TrainResult", "TrainSweepResult",
    "TrainWorkload",
    "CalibrateInputs", "CalibrateOutputs", "CalibrateRequest", "CalibrateResult",
    "MeasureModel", "MeasureOutputs", "MeasureRequest", "MeasureResult", "MeasureSweep",
    "MeasureTarget",
    "ResolvedCalibrate", "ResolvedMeasure",
]
