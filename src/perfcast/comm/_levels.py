"""Per-row algorithm formulas over a cluster's intra-node and inter-node levels.

A group of N consecutive GPUs spans k = ceil(N / gpus_per_node) nodes with g GPUs in each
(g = N on one node). Intra-node terms: the GPU's LinkFit, else the link's constants. The
network gives each node A = min(g x flow, ceil(g / gpus_per_nic) x bandwidth x efficiency /
taper): each GPU's stream reaches at most the measured point-to-point rate (flow, when the
link gives one), the node's adapters at most their rate, cut by the leaf-to-spine taper once
the group spans more nodes than one leaf reaches; a ring that crosses nodes moves, per node
and direction, as many bytes as each GPU does inside it (NCCL spreads its channels over the
node's NICs), so its rate is min(intra, A).

A network described by a measured flow (flow_bandwidth_bps: a user's send/recv measurement)
also limits how many of those g streams run at once: a stream reaches its flow rate only with
a flow's bandwidth-delay product in flight (flow x the network's point-to-point latency), and
each GPU has one step's chunk in flight (S/N in a ring), so a node drives
clip(chunk / bdp, 1, g) flows (Vidur's 2-node A100 all-reduce: the measured bus bandwidth
grows with S/N, not S, up to the adapter; its send/recv alone sets bdp). A spec-sheet network
(no flow) keeps g streams at every size.
"""

from __future__ import annotations

import copy

import numpy as np

from perfcast.comm._alphabeta import COLLECTIVES
from perfcast.comm._fits import LinkFit
from perfcast.specs import Cluster

__all__ = ["Levels"]

AR, AG, RS, A2A, P2P, BC = (COLLECTIVES.index(k) for k in (
    "allreduce", "allgather", "reducescatter", "alltoall", "sendrecv", "broadcast"))
# ring traffic = SHARE (N-1)/N + WHOLE buffers per GPU, in STEPS (N-1) steps, per code
_RING_SHARE, _RING_WHOLE, _RING_STEPS = (np.zeros(len(COLLECTIVES)) for _ in range(3))
for _code, _share, _whole, _steps in ((AR, 2, 0, 2), (AG, 1, 0, 1), (RS, 1, 0, 1),
                                      (BC, 0, 1, 1)):
    _RING_SHARE[_code], _RING_WHOLE[_code], _RING_STEPS[_code] = _share, _whole, _steps


# NCCL src/graph/tuning.cc: hwLat[NCCL_HW_NVLINK][NCCL_ALGO_NVLS][NCCL_PROTO_SIMPLE] (us)
NVLS_LATENCY_S = 23e-6
# NCCL src/graph/tuning.cc ncclTopoTuneModel: `if (a == NCCL_ALGO_COLLNET) busBw *= .9`
COLLNET_EFFICIENCY = 0.9
# A collective's network stream sends and receives through the GPU's adapter at once, where a
# send/recv test (flow_bandwidth_bps) only sends: NCCL src/graph/tuning.cc discounts that case
# to 0.7 ("if ppn < 2, then we are sending/receiving at the same GPU through the NIC, apply
# some bw discount"; NCCL applies it to LL128 rings, perfcast to every measured flow).
DUPLEX_FLOW = 0.7


def _spine_taper(oversubscription: float, nodes_per_leaf: int | None,
                 nodes: np.ndarray) -> np.ndarray:
    """Divisor of the adapters' rate for groups of `nodes` nodes: the leaf-to-spine
    oversubscription once a group spans more nodes than one leaf reaches, else 1."""
    if nodes_per_leaf is None:
        return np.ones(len(nodes))
    return np.where(nodes > nodes_per_leaf, oversubscription, 1.0)


class Levels:
    """Intra- and inter-node terms of one cluster for the rows' group sizes."""

    def __init__(self, cluster: Cluster, fit: LinkFit | None, group: np.ndarray):
        intra, inter = cluster.intra_node, cluster.inter_node
        self.fit = fit if fit is not None and fit.kind == intra.kind.value else None
        self.bw_i = intra.bandwidth_bps
        self.base_i = self.fit.base_s if self.fit else intra.collective_base_s
        self.alpha_i = self.fit.alpha_s if self.fit else intra.latency_s
        self.const_eta = intra.bus_efficiency
        self.nvls_eff = intra.nvls_efficiency
        p2p = self.fit is not None and self.fit.p2p_base_s is not None
        self.p2p_base = self.fit.p2p_base_s if p2p else self.base_i + self.alpha_i
        self.p2p_eta = self.fit.p2p_efficiency if p2p else None
        per_node = cluster.gpus_per_node
        self.n = np.maximum(group, 1.0)
        self.multi = (self.n > per_node) & (inter is not None)
        self.g = np.where(self.multi, float(per_node), self.n)
        self.k = np.where(self.multi, np.ceil(self.n / per_node), 1.0)
        self.bdp = None
        if inter is None:
            self.base_x, self.alpha_x, self.net_gpu, self.sharp = 0.0, 0.0, np.inf, False
            self.net_cap = np.full(len(self.n), np.inf)
            self.net_pair = np.full(len(self.n), np.inf)
        else:
            self.base_x, self.alpha_x, self.sharp = (inter.collective_base_s, inter.latency_s,
                                                     inter.sharp)
            port = inter.bandwidth_bps * inter.bus_efficiency
            flow = inter.flow_bandwidth_bps
            self.net_gpu = port if flow is None else flow * DUPLEX_FLOW
            taper = _spine_taper(inter.oversubscription, inter.nodes_per_leaf, self.k)
            self.net_cap = np.where(self.multi, np.ceil(self.g / inter.gpus_per_nic) * port
                                    / taper, np.inf)
            self.net_pair = np.minimum(port if flow is None else flow, port / taper)
            if flow is not None:
                self.bdp = flow * (self.p2p_base + self.base_x + self.alpha_x)
        self.ceiling = self.fit.ceiling_for(self.g) if self.fit else None

    def net_node(self, chunk: np.ndarray) -> np.ndarray:
        """Network bytes/s of one node (inf on one node) while each of its GPUs has `chunk`
        bytes of one step in flight: min(flows x each GPU's flow, the adapters' rate), with
        g flows, or clip(chunk / bdp, 1, g) on a network described by a measured flow."""
        flows = self.g if self.bdp is None else np.clip(chunk / self.bdp, 1.0, self.g)
        return np.where(self.multi, np.minimum(flows * self.net_gpu, self.net_cap), np.inf)

    def eta(self, traffic: np.ndarray, pair: bool = False) -> np.ndarray | float:
        """Intra-node bus efficiency of rows whose GPUs each send `traffic` bytes, in a group
        of g GPUs (`pair`: two GPUs)."""
        if self.fit is None:
            return self.const_eta
        if pair:
            return self.fit.efficiency(traffic, 2.0)
        return self.fit.efficiency(traffic, self.g, self.ceiling)

    def intra_phase(self, frac: np.ndarray, steps: np.ndarray, size: np.ndarray) -> np.ndarray:
        """One ring collective over the g GPUs of a node: base + steps alpha + traffic /
        (bw eta)."""
        traffic = frac * size
        t = self.base_i + steps * self.alpha_i + traffic / (self.bw_i * self.eta(traffic))
        return np.where(self.g > 1, t, 0.0)

    def _net_share(self, chunk: np.ndarray) -> np.ndarray:
        """Network bytes/s of one GPU while every GPU of its node sends `chunk` a step."""
        return self.net_node(chunk) / self.g

    def ring(self, code: np.ndarray, size: np.ndarray) -> np.ndarray:
        """Flat ring over all N GPUs (Patarasuk & Yuan 2009): all-reduce sends 2(N-1)/N of the
        buffer in 2(N-1) steps, all-gather / reduce-scatter half of it; broadcast as a
        pipelined chain (the whole buffer, N-1 steps). Rows of code AR, AG, RS or BC. Only
        the steps that cross nodes (2(k-1) for all-reduce, k-1 otherwise) pay the network's
        latency, as NCCL's tuner charges a ring (src/graph/tuning.cc: (nsteps - nInterSteps)
        x intraLat + nInterSteps x interLat)."""
        n = self.n
        frac = _RING_SHARE[code] * (n - 1) / n + _RING_WHOLE[code]
        steps = _RING_STEPS[code] * (n - 1)
        traffic = frac * size
        rate = np.minimum(self.bw_i * self.eta(traffic), self.net_node(size / n))
        hops = _RING_STEPS[code] * (self.k - 1)  # steps that cross the network
        alphas = (steps - hops) * self.alpha_i + hops * self.alpha_x
        return self.base_i + self.multi * self.base_x + alphas + traffic / rate

    def tree_allreduce(self, size: np.ndarray) -> np.ndarray:
        """Double binary tree (NCCL 2.4): a chain inside each node, binary trees across nodes;
        each GPU and each node sends 2S (reduce up, broadcast down, pipelined)."""
        traffic = 2 * size
        rate = np.minimum(self.bw_i * self.eta(traffic), self.net_node(size / self.n))
        hops = 2 * (self.g - 1) * self.alpha_i + 2 * np.ceil(np.log2(self.k)) * self.alpha_x
        return self.base_i + self.multi * self.base_x + hops + traffic / rate

    def _inter(self, code: np.ndarray, shard: np.ndarray) -> np.ndarray:
        """The network phase of a hierarchical collective: k nodes, `shard` bytes per GPU,
        every GPU through its share of its node's NICs (ring, or tree for all-reduce)."""
        k = self.k
        rate = self._net_share(shard / k)
        frac = np.where(code == AR, 2 * (k - 1) / k, (k - 1) / k)
        steps = np.where(code == AR, 2 * (k - 1), k - 1)
        ring = steps * self.alpha_x + frac * shard / rate
        tree = 2 * np.ceil(np.log2(k)) * self.alpha_x + 2 * shard / rate
        return self.base_x + np.where(code == AR, np.minimum(ring, tree), ring)

    def hierarchical(self, code: np.ndarray, size: np.ndarray) -> np.ndarray:
        """Multi-node rows of code AR, AG or RS: intra-node reduce-scatter, network all-reduce
        of 1/g of the data, intra-node all-gather (all-gather: network then node;
        reduce-scatter: node then network)."""
        g = self.g
        node = self.intra_phase((g - 1) / g, g - 1, size)
        return np.where(code == AR, 2 * node, node) + self._inter(code, size / g)

    def nvls_allreduce(self, size: np.ndarray) -> np.ndarray:
        """NVLink SHARP all-reduce inside one NVLink domain (NCCL's NVLS algorithm, Simple
        protocol): each GPU reduces its 1/g shard in the switch (multimem.ld_reduce over all g
        GPUs) and multicasts the result (multimem.st), so each GPU's link carries the buffer
        S once per direction, against 2(g-1)/g S for a ring. Fixed cost: NCCL's NVLS latency
        (src/graph/tuning.cc hwLat[NVLINK][NVLS][SIMPLE] = 23 us), not per-rank steps. Rate:
        the measured two-GPU NVLink efficiency x the link's nvls_efficiency (NCCL's
        nvlsEfficiency). inf where the link has no SHARP, the group spans nodes or has two
        GPUs (NCCL enables NVLS above two: src/transport/nvls.cc ncclNvlsInit)."""
        if self.nvls_eff is None:
            return np.full(len(size), np.inf)
        t = self.base_i + NVLS_LATENCY_S + size / (self.bw_i * self.nvls_eff
                                                  * self.eta(size, pair=True))
        return np.where(self.multi | (self.g <= 2), np.inf, t)

    def collnet_allreduce(self, size: np.ndarray) -> np.ndarray:
        """InfiniBand SHARP all-reduce (NCCL CollNet): reduce-scatter inside each node, every
        GPU sends its 1/g shard once to the switches, which reduce across the k nodes and
        return the sum (one network hop whatever k: tuning.cc adds interLat once for CollNet),
        then all-gather inside the node. The network phase runs at 0.9 of the GPU's share
        (tuning.cc `if (a == NCCL_ALGO_COLLNET) busBw *= .9`). inf without SHARP or on one
        node."""
        if not self.sharp:
            return np.full(len(size), np.inf)
        g = self.g
        node = self.intra_phase((g - 1) / g, g - 1, size)
        shard = size / g
        net = self.base_x + self.alpha_x + shard / (COLLNET_EFFICIENCY * self._net_share(shard))
        return np.where(self.multi, 2 * node + net, np.inf)

    def subset(self, rows: np.ndarray) -> Levels:
        """The same cluster terms for the rows at integer positions `rows`."""
        sub = copy.copy(self)
        for name in ("n", "multi", "g", "k", "net_cap", "net_pair", "ceiling"):
            value = getattr(self, name)
            if value is not None:
                setattr(sub, name, value.take(rows))
        return sub

    def alltoall(self, size: np.ndarray) -> np.ndarray:
        """Every GPU sends S/N to each peer at once: (g-1)/N S inside its node, and its node
        sends g (N-g)/N S over the network; the slower side bounds the time."""
        n, g = self.n, self.g
        local = (g - 1) / n * size
        inside = local / (self.bw_i * self.eta(local))
        across = g * (n - g) / n * size / self.net_node(size / n)
        alphas = (g - 1) * self.alpha_i + (n - g) * self.alpha_x
        return self.base_i + self.multi * self.base_x + alphas + np.maximum(inside, across)

    def sendrecv(self, size: np.ndarray) -> np.ndarray:
        """One GPU to one GPU: its own p2p latency and efficiency where measured (else the
        2-GPU collective curve), one NIC across nodes (a group wider than a node means the
        pair sits on two nodes)."""
        eta = self.eta(size, pair=True) if self.p2p_eta is None else self.p2p_eta
        inside = self.p2p_base + size / (self.bw_i * eta)
        across = self.p2p_base + self.base_x + self.alpha_x + size / self.net_pair
        return np.where(self.multi, across, inside)
