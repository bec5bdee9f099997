"""One RLHF PPO step (Ouyang et al. 2022; the DeepSpeed-Chat / OpenRLHF step structure):
the actor generates responses, the reference, reward and critic models score them (one
forward each), then the actor and the critic train on the scored batch for `ppo_epochs`.

Generation is a serving forecast (perfcast.compose.forecast_inference): the GPUs form
replicas of `generation_tp` GPUs, each generating its share of the prompts as one batch.
Scoring runs data-parallel, each GPU a forward over its share of prompt + response.
Training is `forecast_training` of the actor and of the critic on prompt + response
sequences. All models share the same GPUs in turn (co-located, as DeepSpeed-Chat's hybrid
engine runs them); phases do not overlap.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from perfcast.comm import CollectiveModel, CustomAllReduce
from perfcast.compose import forecast_inference, step_time
from perfcast.errors import InputError
from perfcast.kernels import ExecutionTimeModel
from perfcast.ops import Batch, step_ops
from perfcast.specs import Cluster, ModelSpec, ParallelPlan, Precision
from perfcast.train._forecast import TrainForecast, default_time_model, forecast_training
from perfcast.train._job import TrainJob

__all__ = ["RLHFForecast", "rlhf_step"]


@dataclass(frozen=True)
class RLHFForecast:
    """Seconds per PPO step by phase; `step_s` is their sum."""

    generation_s: float
    scoring_s: float
    actor_train_s: float
    critic_train_s: float
    actor: TrainForecast
    critic: TrainForecast

    @property
    def training_s(self) -> float:
        return self.actor_train_s + self.critic_train_s

    @property
    def step_s(self) -> float:
        return self.generation_s + self.scoring_s + self.training_s

    def as_dict(self) -> dict:
        return {"step_s": self.step_s, "generation_s": self.generation_s,
                "scoring_s": self.scoring_s, "training_s": self.training_s,
                "actor_train_s": self.actor_train_s, "critic_train_s": self.critic_train_s,
                "generation_share": self.generation_s / self.step_s,
                "actor": self.actor.as_dict(), "critic": self.critic.as_dict()}


def rlhf_step(actor: ModelSpec, cluster: Cluster, *, prompts: int, prompt_tokens: int,
              response_tokens: int, plan: ParallelPlan | None = None, micro_batch: int = 1,
              ppo_epochs: int = 1, generation_tp: int = 1, critic: ModelSpec | None = None,
              reward: ModelSpec | None = None, precision: Precision | None = None,
              recompute: str = "none", time_model: ExecutionTimeModel | None = None,
              comm_model: CollectiveModel | None = None) -> RLHFForecast:
    """Forecast one PPO step of `prompts` prompts on `cluster` (module docstring). The
    critic and reward model default to the actor's architecture; the training plan to
    ZeRO-3 data parallelism over every GPU."""
    for name, value in (("prompts", prompts), ("prompt_tokens", prompt_tokens),
                        ("response_tokens", response_tokens), ("ppo_epochs", ppo_epochs),
                        ("generation_tp", generation_tp)):
        if value < 1:
            raise InputError(name, f"must be >= 1, got {value}", ">= 1")
    gpus = cluster.num_gpus
    if gpus % generation_tp:
        raise InputError("generation_tp", f"{generation_tp} does not divide {gpus} GPUs",
                         [d for d in range(1, gpus + 1) if gpus % d == 0])
    time_model = time_model or default_time_model()
    critic, reward = critic or actor, reward or actor
    plan = plan or ParallelPlan(dp=gpus, zero_stage=3)
    if prompts % (micro_batch * plan.dp):
        raise InputError("prompts", f"{prompts} prompts do not split into micro-batches of "
                         f"{micro_batch} on dp={plan.dp}",
                         f"a multiple of micro_batch x dp = {micro_batch * plan.dp}")
    seq = prompt_tokens + response_tokens
    replicas = gpus // generation_tp
    gen = forecast_inference(actor, cluster, batch=math.ceil(prompts / replicas),
                             prompt_tokens=prompt_tokens, output_tokens=response_tokens,
                             precision=precision, plan=ParallelPlan(tp=generation_tp),
                             time_model=time_model, comm_model=CustomAllReduce())
    per_gpu = math.ceil(prompts / gpus)
    scoring = sum(step_time(step_ops(m, Batch.prefill(per_gpu, seq), precision,
                                     phase="forward", all_logits=True), cluster,
                            time_model=time_model).time_s for m in (actor, reward, critic))
    trained = []
    for model in (actor, critic):
        job = TrainJob(model=model, cluster=cluster, plan=plan, seq_len=seq,
                       micro_batch=micro_batch, global_batch=prompts, precision=precision,
                       recompute=recompute)
        trained.append(forecast_training(job, time_model, comm_model))
    return RLHFForecast(generation_s=gen.e2e_s, scoring_s=scoring,
                        actor_train_s=ppo_epochs * trained[0].iteration_time_s,
                        critic_train_s=ppo_epochs * trained[1].iteration_time_s,
                        actor=trained[0], critic=trained[1])
