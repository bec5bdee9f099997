"""Training iterations at any scale: data, tensor, sequence, context, pipeline and expert
parallelism, ZeRO/FSDP, pipeline schedules, recomputation, FP8 and LoRA; time per
iteration with its breakdown, memory per GPU, MFU; the plan search; RLHF PPO steps.

Each micro-batch's forward and backward is a step composed by `perfcast.compose`
(`compose.training_step`); this package adds the pipeline schedule, the collectives in
their groups, the gradient reduction (`compose.reduction_end`), the optimizer and memory."""

from perfcast.train._cnn import CNNTrainForecast, cnn_training_ops, forecast_cnn_training
from perfcast.train._engine import PipelineTasks, pipeline_tasks
from perfcast.train._forecast import (
    FLOP_CONVENTION,
    ITERATION_PARTS,
    TrainForecast,
    default_time_model,
    forecast_training,
    iteration_parts,
    mfu_ceiling,
)
from perfcast.train._job import RECOMPUTE, TrainJob, training_precision
from perfcast.train._memory import (
    MemoryBudget,
    activation_bytes_per_layer,
    eager_step_memory,
    state_bytes_per_param,
)
from perfcast.train._memory_policy import (
    DEFAULT_MEMORY_POLICY,
    MEMORY_POLICIES,
    TrainingMemoryPolicy,
    memory_policy,
)
from perfcast.train._overlap import OVERLAP_PARTS, CommOverlap
from perfcast.train._rlhf import RLHFForecast, rlhf_step
from perfcast.train._scale import SCALE_PARTS, ScaleEffects
from perfcast.train._schedule import build_schedule, simulate
from perfcast.train._stack import (
    ATTENTION_FAMILIES,
    LEGACY_ATTENTION,
    STACKS,
    StackScaled,
    attention_penalty,
    load_stack,
    stack_overlap,
    stack_time_model,
)
from perfcast.train._sweep import SWEEP_COLUMNS, sweep_plans

__all__ = ["ATTENTION_FAMILIES", "CNNTrainForecast", "DEFAULT_MEMORY_POLICY", "FLOP_CONVENTION",
           "MemoryBudget",
           "MEMORY_POLICIES", "RECOMPUTE", "STACKS", "SWEEP_COLUMNS", "TrainingMemoryPolicy",
           "memory_policy", "state_bytes_per_param",
           "PipelineTasks", "RLHFForecast", "StackScaled", "TrainForecast", "TrainJob",
           "activation_bytes_per_layer", "build_schedule", "eager_step_memory", "cnn_training_ops",
           "default_time_model", "forecast_cnn_training",
           "forecast_training", "load_stack", "mfu_ceiling", "pipeline_tasks", "rlhf_step",
           "SCALE_PARTS", "ScaleEffects", "simulate",
           "stack_time_model", "CommOverlap", "ITERATION_PARTS", "LEGACY_ATTENTION",
           "OVERLAP_PARTS", "attention_penalty", "iteration_parts", "stack_overlap",
           "sweep_plans", "training_precision"]
