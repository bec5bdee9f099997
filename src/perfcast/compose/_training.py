"""One LLM training micro-batch on one GPU, composed like every other step: its op table
priced by `step_time`. `perfcast train` builds its iterations from these steps (each layer
part's kernel seconds per phase), with the pipeline schedule, the collectives in their groups
and the memory on top.

By default the table is a Megatron-style training stack's (`ops.training_ops`: fused
FlashAttention, fused norms, TP/SP/CP/EP and LoRA variants) with the loss as eager PyTorch
runs it under autocast (`ops.loss_rows`). An `EagerGraph` prices instead the HuggingFace
module graph as eager PyTorch launches it (`ops.eager_ops(mode="training")`, the table
`perfcast step --mode training` prices: RMSNorm's casts, RoPE, SiLU-and-mul and residual adds
as separate kernels, SDPA or materialised attention), for the stacks that train that graph
(hf-transformers, fsdp): on a real H100 the eager graph's elementwise kernels take as long as
a third of the GEMMs (docs/validation/gpu_check/h100_train.md). Megatron-style stacks keep
the fused table: priced with the eager graph, the MosaicML llm-foundry grid's tokens/s MAPE
goes from 0.27 to 0.42.

Execution (`training_execution`): the Megatron-style table as CUDA graphs' sum of kernels
(no host->GPU queue: at training shapes its kernels outlast their launches, the eager queue
adds 0.01 ms to Llama-2-7B's 139 ms micro-batch); an EagerGraph with its stack's measured
host through `step_time`'s eager queue, so a small micro-batch waits on the host.
"""

from __future__ import annotations

from typing import Literal

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

from perfcast.comm import CollectiveModel
from perfcast.compose._step import Execution, StepForecast, step_time
from perfcast.kernels import ExecutionTimeModel
from perfcast.ops import COLUMNS, eager_ops, loss_rows, training_ops
from perfcast.specs import Cluster, ModelSpec, ParallelPlan, Precision

__all__ = ["TRAINING_EXECUTION", "EagerGraph", "training_execution", "training_step",
           "training_step_ops"]

TRAINING_EXECUTION = Execution.CUDA_GRAPH


class EagerGraph(BaseModel):
    """A training step that is the HF module graph run by eager PyTorch (not a Megatron-style
    fused table): its attention kernel, whether the stack's fusion rules apply, whether fp32
    parameters run under torch.autocast (AMP) rather than as 16-bit parameters, and the
    stack's host costs, which make small micro-batches host-bound (`host_wait_s`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    attention: Literal["sdpa", "eager"] = "sdpa"
    fused: bool = False
    autocast: bool = False
    # the stack's host: seconds per eager training kernel (0: no host queue) and per iteration
    host_dispatch_s: float = Field(0.0, ge=0.0)
    host_step_s: float = Field(0.0, ge=0.0)

    @staticmethod
    def expresses(plan: ParallelPlan, lora_rank: int | None) -> bool:
        """Whether the eager table describes this shard: tensor parallelism only (no sequence
        or context parallelism, no expert parallelism, no LoRA adapters)."""
        return not plan.sp and plan.cp == 1 and plan.ep == 1 and lora_rank is None


def training_execution(graph: EagerGraph | None, plan: ParallelPlan,
                       lora_rank: int | None) -> tuple[Execution, float | None]:
    """(launch mode, seconds per kernel dispatch) of a training micro-batch (module
    docstring): eager, at the host's dispatch, where `graph`'s table is priced and its host
    measured; CUDA graphs otherwise."""
    if graph is not None and graph.host_dispatch_s > 0 and EagerGraph.expresses(plan,
                                                                                 lora_rank):
        return Execution.EAGER, graph.host_dispatch_s
    return TRAINING_EXECUTION, None


def training_step_ops(model: ModelSpec, micro_batch: int, seq_len: int,
                      precision: Precision | None = None, plan: ParallelPlan | None = None, *,
                      lora_rank: int | None = None,
                      graph: EagerGraph | None = None) -> pd.DataFrame:
    """Forward + backward kernels and inline collectives of one micro-batch on one GPU of
    `plan` (TP/SP/CP/EP shards), the training loss included, the optimizer left out: the
    Megatron-style table, or `graph`'s eager one where it expresses the plan
    (`EagerGraph.expresses`; elsewhere the Megatron-style table)."""
    precision = precision or Precision()
    plan = plan or ParallelPlan()
    if graph is not None and EagerGraph.expresses(plan, lora_rank):
        return eager_ops(model, micro_batch, seq_len, "training", precision,
                         ParallelPlan(tp=plan.tp), graph.fused, attention=graph.attention,
                         autocast=graph.autocast)[COLUMNS]
    table = training_ops(model, micro_batch, seq_len, precision, plan, lora_rank=lora_rank,
                         optimizer=False)
    return _with_loss(table, precision)[COLUMNS]


def training_step(model: ModelSpec, micro_batch: int, seq_len: int, cluster: Cluster,
                  precision: Precision | None = None, plan: ParallelPlan | None = None, *,
                  lora_rank: int | None = None, time_model: ExecutionTimeModel | None = None,
                  comm_model: CollectiveModel | None = None,
                  graph: EagerGraph | None = None) -> StepForecast:
    """One micro-batch's forward + backward, priced (`step_time` defaults: the plain roofline
    and ring collectives unless models are given), launched as `training_execution` says."""
    plan = plan or ParallelPlan()
    ops = training_step_ops(model, micro_batch, seq_len, precision, plan, lora_rank=lora_rank,
                            graph=graph)
    execution, dispatch_s = training_execution(graph, plan, lora_rank)
    return step_time(ops, cluster, execution, time_model=time_model, comm_model=comm_model,
                     dispatch_s=dispatch_s)


def _with_loss(table: pd.DataFrame, precision: Precision) -> pd.DataFrame:
    """Replace the head's one-pass sampling row by the training loss as eager PyTorch runs
    it (`ops.loss_rows`: fp32 cross-entropy under autocast)."""
    head = table[(table["family"] == "sampling") & (table["layer"] == "head")]
    if head.empty:
        return table
    loss = pd.DataFrame(loss_rows(float(head["m"].iloc[0]), float(head["n"].iloc[0]),
                                  precision), columns=COLUMNS)
    return pd.concat([table.drop(index=head.index), loss], ignore_index=True)
