"""perfcast's application layer: one typed request per question, one `run`.

    from perfcast.api import InferRequest, run
    result = run(InferRequest(model="llama-2-7b", hardware="h100-sxm"))
    result.forecast.ttft_s, result.payload()   # rich objects, and what `--json` prints

Every face (CLI, suite, sweep, capacity, UI, plots, validate) builds a request and calls
`run`; `resolve` is the one place names and flags become specs and defaults are chosen.
"""

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
from perfcast.api._choices import (
    Hardware,
    KernelChoice,
    ModelChoice,
    PrecisionChoice,
    ServingPrecision,
    kernel_model,
    machines_for,
)
from perfcast.api._infer import (
    InferEngine,
    InferPlan,
    InferRequest,
    InferResult,
    InferWorkload,
    ResolvedInfer,
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

__all__ = [
    "COMMANDS", "Command", "Group", "Hardware", "InferEngine", "InferPlan", "InferRequest",
    "InferResult", "InferWorkload", "KernelChoice", "ModelChoice", "PrecisionChoice", "Request",
    "ResolvedInfer", "Result", "ServingPrecision", "command_for", "dump_request",
    "kernel_model", "load_request", "machines_for", "request_from_options", "resolve", "run",
    "run_options",
    "ResolvedStep", "StepEngine", "StepHardware", "StepOutputs", "StepPlan", "StepPrecision",
    "StepRequest", "StepResult", "StepWorkload",
]
