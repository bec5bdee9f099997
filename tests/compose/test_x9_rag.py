"""Scenario X9: RAG - embedding model + vector search + Llama-3-8B: latency breakdown."""

import pytest

from perfcast.compose import forecast_inference, forecast_rag, step_time
from perfcast.errors import InputError
from perfcast.kernels import RooflineModel
from perfcast.ops import VectorIndex, embed_ops, search_ops
from perfcast.specs import Precision, cluster_for, get_device, get_model

ROOF = RooflineModel()
GEN, EMB = get_model("llama-3-8b"), get_model("bge-large-en-v1.5")


@pytest.fixture(scope="module")
def h100_box():
    return cluster_for(get_device("h100-sxm"), 1)


def rag(box, index=None, **kw):
    kw.setdefault("time_model", ROOF)
    kw.setdefault("output_tokens", 16)
    return forecast_rag(GEN, EMB, box, index or VectorIndex(), **kw)


def search_s(box, index, top_k=5):
    return step_time(search_ops(index, top_k), box, "cuda-graph", 0.0, ROOF).time_s


def test_flat_search_is_bytes_over_bandwidth(h100_box):
    n, d, k = 10_000_000, 1024, 5
    bw = h100_box.device.hbm_bandwidth_bps
    # scan: read every fp32 vector, write one fp32 distance each;
    # top-k: read the N distances, write k (distance, id) pairs
    by_hand = (n * d * 4 + n * 4) / bw + (n * 4 + k * 12) / bw
    assert search_s(h100_box, VectorIndex(vectors=n, dim=d), k) == pytest.approx(by_hand,
                                                                                 rel=1e-9)
    assert by_hand == pytest.approx(n * d * 4 / bw, rel=0.01)  # the vectors dominate


def test_embedder_is_the_encoder_without_an_lm_head():
    ops = embed_ops(EMB, 32, Precision())
    assert "lm_head" not in set(ops["op"]) and {"dense", "l2_normalize"} <= set(ops["op"])
    gemm = ops[ops["family"] == "gemm"]
    h = 1024  # BERT-large layer: q, k, v, o (4h²) + 4h FFN up and down (8h²) per token
    by_hand = 2 * 32 * 24 * 12 * h * h + 2 * h * h  # + the pooler on [CLS]
    assert float((gemm["flops"] * gemm["count"]).sum()) == pytest.approx(by_hand, rel=1e-12)
    with pytest.raises(InputError) as err:
        embed_ops(GEN, 32, Precision())
    assert err.value.field == "embed_model"


def test_ivf_scans_nprobe_over_nlist_of_the_vectors(h100_box):
    flat = search_s(h100_box, VectorIndex(kind="flat"))
    ivf = search_s(h100_box, VectorIndex(kind="ivf-flat", nlist=16384, nprobe=32))
    pq = search_s(h100_box, VectorIndex(kind="ivf-pq", nlist=16384, nprobe=32, pq_bytes=64))
    assert ivf < flat / 50 and pq < ivf
    # the coarse scan plus 32/16384 of the vectors: ~ (16384 + 19531) x 4 KiB / bandwidth
    bw = h100_box.device.hbm_bandwidth_bps
    assert ivf == pytest.approx((16384 + 1e7 * 32 / 16384) * 4096 / bw, rel=0.02)
    more = search_s(h100_box, VectorIndex(kind="ivf-flat", nlist=16384, nprobe=256))
    assert ivf < more < flat
    assert VectorIndex(kind="ivf-pq").index_bytes() < VectorIndex(kind="flat").index_bytes() / 20


def test_breakdown_sums_to_e2e_and_prompt_is_augmented(h100_box):
    f = rag(h100_box, query_tokens=40, top_k=4, chunk_tokens=300)
    out = f.as_dict()
    assert sum(out["breakdown"].values()) == pytest.approx(out["e2e_s"], rel=1e-12)
    assert set(out["breakdown"]) == {"embed_s", "search_s", "prefill_s", "decode_s"}
    assert out["prompt_tokens"] == 40 + 4 * 300
    assert out["ttft_s"] == pytest.approx(f.embed_s + f.search_s + f.prefill_s, rel=1e-12)
    # the generator is the plain inference forecast of the augmented prompt
    gen = forecast_inference(GEN, h100_box, prompt_tokens=1240, output_tokens=16,
                             time_model=ROOF)
    assert f.prefill_s == gen.ttft_s and f.decode_s == pytest.approx(gen.e2e_s - gen.ttft_s)


def test_monotone_in_index_size_and_top_k(h100_box):
    by_size = [rag(h100_box, VectorIndex(vectors=n)).search_s for n in (10**5, 10**6, 10**7)]
    assert by_size == sorted(by_size) and len(set(by_size)) == 3
    by_k = [rag(h100_box, top_k=k, chunk_tokens=256) for k in (1, 4, 16)]
    assert [f.prefill_s for f in by_k] == sorted(f.prefill_s for f in by_k)
    assert [f.e2e_s for f in by_k] == sorted(f.e2e_s for f in by_k)
    assert by_k[0].e2e_s < by_k[-1].e2e_s


def test_cpu_search_is_slower_than_on_the_gpu(h100_box):
    cpu = cluster_for(get_device("epyc-9654"), 1)
    on_cpu = rag(h100_box, search_cluster=cpu)
    on_gpu = rag(h100_box)
    assert on_cpu.search_device == "epyc-9654"
    ratio = h100_box.device.hbm_bandwidth_bps / cpu.device.hbm_bandwidth_bps
    assert on_cpu.search_s / on_gpu.search_s == pytest.approx(ratio, rel=0.05)
    assert on_cpu.prefill_s == on_gpu.prefill_s


def test_bad_inputs_name_the_field(h100_box):
    cases = [(dict(kind="hnsw"), "index"), (dict(kind="ivf-flat", nprobe=64, nlist=32), "nprobe"),
             (dict(kind="ivf-pq", dim=1000, pq_bytes=64), "pq_bytes"), (dict(vectors=0), "vectors")]
    for kwargs, field in cases:
        with pytest.raises(InputError) as err:
            VectorIndex(**kwargs)
        assert err.value.field == field
    with pytest.raises(InputError) as err:  # 30 M fp32 vectors (123 GB) beside the LLM
        rag(h100_box, VectorIndex(vectors=30_000_000))
    assert err.value.field == "index_vectors" and "cpu" in err.value.allowed
    with pytest.raises(InputError) as err:
        rag(h100_box, query_tokens=600)
    assert err.value.field == "query_tokens"
    with pytest.raises(InputError) as err:
        rag(h100_box, top_k=20, chunk_tokens=512)  # 10,272 tokens > Llama-3's 8,192
    assert err.value.field == "prompt_tokens"
