"""Speed of the accelerator mapper (scenario X6): `pytest benchmarks/bench_accel.py
--benchmark-only -n 0` (given by path: the file name keeps it out of the default collection).

Target: every ResNet-50 layer (53 convs + fc; 24 distinct shapes, each searched once) mapped
onto the Eyeriss-like 168-PE design for minimum EDP in < 30 s on one core. Measured on the
shared 2-core machine (process CPU time, seeds 0-3, same load for both): 4.2-5.7 s before the
descent stage was added to the mapper, 6.7-8.2 s after; in exchange the widest per-layer EDP-
search energy spread over seeds 0-3 fell from 38% to 9% and the whole-model pJ/MAC spread
from 4.1% to 1.6% (`python benchmarks/bench_accel.py --seeds`)."""


from perfcast.accel import get_arch, map_layers, model_problems, model_totals


def _map_resnet50():
    arch = get_arch("eyeriss-like")
    problems = model_problems("resnet50")
    return problems, map_layers(arch, problems, objective="edp", seed=0)


def test_map_all_resnet50_layers(benchmark):
    problems, results = benchmark.pedantic(_map_resnet50, rounds=1, iterations=1)
    totals = model_totals(problems, results)
    assert len(results) == 54 and totals["utilization"] > 0
    if benchmark.stats is not None:  # None under --benchmark-disable
        assert benchmark.stats["min"] < 30.0


def _seed_spread(seeds: range = range(4)) -> None:
    """CPU time per seed, and the widest per-layer energy spread over the seeds."""
    import time

    arch, problems, per_layer = get_arch("eyeriss-like"), model_problems("resnet50"), {}
    for seed in seeds:
        start = time.process_time()
        results = map_layers(arch, problems, objective="edp", seed=seed)
        totals = model_totals(problems, results)
        print(f"seed {seed}: {time.process_time() - start:.2f} s CPU, "
              f"{totals['energy_per_mac_j'] * 1e12:.4f} pJ/MAC")
        for r in results:
            per_layer.setdefault(r.problem, []).append(r.energy_j)
    spread, layer = max((max(v) / min(v) - 1, k) for k, v in per_layer.items())
    print(f"widest per-layer energy spread over seeds: {spread:.1%} ({layer})")


if __name__ == "__main__":  # plain timing without pytest-benchmark
    import sys
    import time

    if "--seeds" in sys.argv:
        _seed_spread()
        sys.exit()
    start = time.perf_counter()
    problems, results = _map_resnet50()
    totals = model_totals(problems, results)
    print(f"{len(results)} layers in {time.perf_counter() - start:.2f} s: "
          f"{totals['cycles']:,} cycles, utilisation {totals['utilization']:.1%}, "
          f"{totals['energy_per_mac_j'] * 1e12:.2f} pJ/MAC")
