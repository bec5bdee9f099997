"""Custom DNN accelerators by the Timeloop/Accelergy method: an architecture spec (storage
hierarchy, PE array, energy per access), a layer as a loop nest, a mapping's reuse analysis
and cost (accesses, cycles, energy per level and tensor), and a mapper over the mapspace."""

from perfcast.accel._arch import TENSORS, ArchSpec, Level, arch_names, get_arch, load_arch_yaml
from perfcast.accel._cost import AccelResult, evaluate_mapping
from perfcast.accel._mapper import DATAFLOWS, OBJECTIVES, default_mapping, search_mapping
from perfcast.accel._mapping import LevelMapping, Mapping
from perfcast.accel._models import MODELS, model_problems
from perfcast.accel._network import map_layers, model_totals
from perfcast.accel._onnx import onnx_problems
from perfcast.accel._problem import DIMS, Problem, conv_problem, gemm_problem

__all__ = [
    "DATAFLOWS", "DIMS", "MODELS", "OBJECTIVES", "TENSORS",
    "AccelResult", "ArchSpec", "Level", "LevelMapping", "Mapping", "Problem", "arch_names",
    "conv_problem", "default_mapping", "evaluate_mapping", "gemm_problem", "get_arch",
    "load_arch_yaml", "map_layers", "model_problems", "model_totals", "onnx_problems",
    "search_mapping",
]
