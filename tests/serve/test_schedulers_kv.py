"""KV accounting of the chunked schedulers: Sarathi-Serve allocates a new prompt's blocks
all at admission (watermark checked against all of them), vLLM v1 allocates each chunk's
blocks as it is scheduled; a prefilling request preempted under Sarathi gives back every
block of its prompt."""

from perfcast.serve._config import ServeConfig
from perfcast.serve._kv import KVCache, MemoryPlan
from perfcast.serve._schedulers import make_scheduler
from perfcast.serve._state import Replica, Requests

BASE = {"model": "llama-2-7b", "gpu": "a100-sxm4-80gb", "max_batch": 8, "watermark": 0.0}


def _replica(scheduler: str, blocks: int, prompts: list[int], outputs: list[int]):
    budget = {"chunk_size": 512} if scheduler == "sarathi" else {"max_batch_tokens": 512}
    config = ServeConfig(**BASE, scheduler=scheduler, **budget)
    kv = KVCache(config, MemoryPlan(1.0, 0.0, 0.0, 0.0, 0.0, 1.0, blocks))
    req = Requests([0.0] * len(prompts), prompts, outputs)
    rep = Replica(0, kv, reserve=False)
    rep.waiting.extend(range(len(prompts)))
    return make_scheduler(config, req), rep, req


def _run(rep: Replica, req: Requests, plan, end_s: float = 1.0) -> None:
    """What the stepper does with a plan's prefill chunks (decodes are not advanced)."""
    for rid, n in plan.prefill:
        c = req.computed[rid] + n
        req.computed[rid] = c
        rep.prefill_kv_tokens += n
        if c == req.prompt[rid] + req.generated[rid]:
            req.generated[rid] += 1
            del rep.prefilling[rid]
            rep.prefill_kv_tokens -= c
            rep.join_decode(rid, c, req.output[rid] - req.generated[rid], end_s)


def test_sarathi_allocates_the_whole_prompt_at_admission_v1_chunk_by_chunk():
    for scheduler, first, second in (("sarathi", 125, 125), ("vllm-v1", 32, 64)):
        sched, rep, req = _replica(scheduler, 1000, [2000], [10])
        plan = sched.schedule(rep, 0.0)
        assert plan.prefill == [(0, 512)]
        assert rep.kv.used == first
        _run(rep, req, plan)
        assert sched.schedule(rep, 1.0).prefill == [(0, 512)]
        assert rep.kv.used == second


def test_sarathi_admits_only_when_the_whole_prompt_fits():
    # 110 blocks: 19 for the first prompt leave 91, short of the second's 100
    for scheduler, admitted in (("sarathi", [0]), ("vllm-v1", [0, 1])):
        sched, rep, req = _replica(scheduler, 110, [300, 1600], [10, 10])
        plan = sched.schedule(rep, 0.0)
        assert [rid for rid, _ in plan.prefill] == admitted, scheduler


def test_sarathi_preempting_a_prefill_frees_its_whole_prompt():
    # r0 (2 blocks) finishes its prefill; r1 holds its 1000-token prompt's 63 blocks with 480
    # computed; r0's next token opens a block, none is free: r1 (the tail) is preempted
    sched, rep, req = _replica("sarathi", 65, [32, 1000], [100, 10])
    plan = sched.schedule(rep, 0.0)
    assert plan.prefill == [(0, 32), (1, 480)] and rep.kv.used == 65
    _run(rep, req, plan)
    plan = sched.schedule(rep, 1.0)
    assert plan.preempted == 1 and plan.decode and not plan.prefill
    assert list(rep.waiting) == [1] and req.computed[1] == 0 and not rep.prefilling
    assert rep.kv.used == 3  # r0's 2 blocks and the one its next token opens


def test_prefill_first_runs_prefill_chunks_before_any_decode():
    """SGLang's loop: while a prompt is prefilling or waiting, steps are prefill-only (the
    running decodes pause), chunked to the budget, KV taken chunk by chunk; then a decode
    step of everyone."""
    sched, rep, req = _replica("prefill-first", 1000, [100, 700], [10, 10])
    plan = sched.schedule(rep, 0.0)
    assert plan.prefill == [(0, 100), (1, 412)] and not plan.decode
    assert rep.kv.used == 7 + 26  # 100 and 412 tokens in 16-token blocks
    _run(rep, req, plan)
    plan = sched.schedule(rep, 1.0)  # r0 decodes in v1; here it waits for r1's last chunk
    assert plan.prefill == [(1, 288)] and not plan.decode
    _run(rep, req, plan)
    plan = sched.schedule(rep, 2.0)
    assert plan.prefill == [] and plan.decode


def test_prefill_first_never_exceeds_its_budget():
    for prompts in ([3000], [40, 600, 90, 5000], [512, 512, 1]):
        sched, rep, req = _replica("prefill-first", 4000, prompts, [4] * len(prompts))
        for step in range(20):
            plan = sched.schedule(rep, float(step))
            assert sum(n for _, n in plan.prefill) <= 512
            assert not (plan.prefill and plan.decode)
            _run(rep, req, plan, end_s=float(step))
