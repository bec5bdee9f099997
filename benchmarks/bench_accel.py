"""Speed of the accelerator mapper (scenario X6): `pytest benchmarks/bench_accel.py
--benchmark-only` (given by path: the file name keeps it out of the default collection).

Target: every ResNet-50 layer (53 convs + fc; 24 distinct shapes, each searched once) mapped
onto the Eyeriss-like 168-PE design for minimum EDP in < 30 s on one core (about 7 s
measured on a shared 2-core machine)."""


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


if __name__ == "__main__":  # plain timing without pytest-benchmark
    import time

    start = time.perf_counter()
    problems, results = _map_resnet50()
    totals = model_totals(problems, results)
    print(f"{len(results)} layers in {time.perf_counter() - start:.2f} s: "
          f"{totals['cycles']:,} cycles, utilisation {totals['utilization']:.1%}, "
          f"{totals['energy_per_mac_j'] * 1e12:.2f} pJ/MAC")
