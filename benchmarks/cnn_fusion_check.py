"""Does compose.fuse_cnn_kernels forecast what fusing ResNet-18 saves on this CPU?

Forecasts (target-measured tier from a quick torch sweep, eager, 1 thread, fp32) of the eager
ResNet-18 table, of it without the batch-norm kernels (BN folded into the convs), and of the
fusion rule's table (BN folded and ReLUs as conv/add epilogues); then measures the eager torch
model, the same model with every BN folded into its conv's weights and bias
(torch.nn.utils.fusion.fuse_conv_bn_eval, ReLUs still separate kernels), and a frozen
TorchScript trace after torch.jit.optimize_for_inference (oneDNN folds BN and fuses conv+ReLU,
and may also change tensor layouts: an upper bound on what fusion alone buys). Needs torch.

    python benchmarks/cnn_fusion_check.py

Three runs on the shared 2-core machine (torch 2.13 CPU; changes vs the eager model): forecast
BN folded -1.4 / -2.1 / -1.7%, fusion rule -2.7 / -3.7 / -2.9%; measured BN folded -2.9% and
-3.4% in the two runs whose eager timing was undisturbed (the other's eager forward read
49.9 ms against 35-37 ms), optimize_for_inference -11.3% and -18.0%. The rule's size matches
BN folding; oneDNN's fused graph saves 3-6x more than the rule forecasts (not validated).
"""

from __future__ import annotations

import copy

import torch
from torch import nn
from torch.nn.utils.fusion import fuse_conv_bn_eval

from perfcast.compose import fuse_cnn_kernels, step_time
from perfcast.kernels import PhysicsModel, add_target_corrections, shipped_calibration
from perfcast.measure import (
    TORCH_OPS,
    local_cpu_device,
    measure_torch_dispatch_s,
    run_torch_cpu_sweep,
)
from perfcast.measure import torch_models as tm
from perfcast.ops import cnn_ops
from perfcast.specs import cluster_for


def fold_batch_norms(net: nn.Module) -> nn.Module:
    """A copy of torch_models.ResNet18 with every BN folded into the conv before it."""
    net = copy.deepcopy(net)
    net.conv1, net.bn1 = fuse_conv_bn_eval(net.conv1, net.bn1), nn.Identity()
    for stage in (net.layer1, net.layer2, net.layer3, net.layer4):
        for block in stage:
            block.conv1, block.bn1 = fuse_conv_bn_eval(block.conv1, block.bn1), nn.Identity()
            block.conv2, block.bn2 = fuse_conv_bn_eval(block.conv2, block.bn2), nn.Identity()
            if block.downsample is not None:
                conv, bn = block.downsample
                block.downsample = nn.Sequential(fuse_conv_bn_eval(conv, bn), nn.Identity())
    return net


def main() -> None:
    ops = cnn_ops("resnet18", 1, 224)
    used = sorted(set(ops["op"].str.split(":").str[0]) & set(TORCH_OPS))
    baseline = tm.reference_s()
    sweep = run_torch_cpu_sweep(quick=True, ops=used)
    device = local_cpu_device()
    model = PhysicsModel(add_target_corrections(shipped_calibration(), sweep,
                                                devices={device.name: device}))
    dispatch_s, cluster = measure_torch_dispatch_s(), cluster_for(device, 1)

    def forecast(table) -> float:
        return step_time(table.reset_index(drop=True), cluster, execution="eager",
                         time_model=model, dispatch_s=dispatch_s).time_s

    f = {"eager": forecast(ops), "bn folded": forecast(ops[ops["op"] != "bn"]),
         "bn folded + relu epilogues": forecast(fuse_cnn_kernels(ops))}
    net, inputs = tm.resnet18_case(1, 224)
    folded = fold_batch_norms(net)
    with torch.no_grad():
        frozen = torch.jit.optimize_for_inference(torch.jit.freeze(
            torch.jit.trace(net, inputs).eval()))
        assert torch.allclose(net(*inputs), folded(*inputs), atol=1e-4)
    m = {name: tm.measure_forward_s(m_, inputs, baseline, repeats=7)["seconds"]
         for name, m_ in (("eager", net), ("bn folded", folded),
                          ("jit optimize_for_inference", frozen))}
    for title, values in (("forecast", f), ("measured", m)):
        base = values["eager"]
        print(f"{title}: " + ", ".join(f"{k} {v * 1e3:.2f} ms ({v / base - 1:+.1%})"
                                       for k, v in values.items()))


if __name__ == "__main__":
    main()
