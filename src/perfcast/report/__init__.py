"""Pictures and timelines of perfcast's results: pure functions from forecasts, simulated
schedules or plain tables to a matplotlib Figure (or a Chrome-trace dict), and one
`save_figure` that writes PNG or SVG. Nothing here draws on screen or writes a file except
`save_figure`, given its path."""

from perfcast.report._breakdown import breakdown_figure, breakdown_table
from perfcast.report._figure import FIGURE_FORMATS, save_figure
from perfcast.report._memory import memory_figure, memory_table
from perfcast.report._pareto import pareto_figure, pareto_front
from perfcast.report._pipeline import pipeline_figure
from perfcast.report._roofline import roofline_ceilings, roofline_figure, roofline_points
from perfcast.report._schedule import TrainSchedule, training_schedule
from perfcast.report._serving import cdf_figure, empirical_cdf, throughput_latency_figure
from perfcast.report._trace import training_trace

__all__ = [
    "FIGURE_FORMATS", "TrainSchedule", "breakdown_figure", "breakdown_table", "cdf_figure",
    "empirical_cdf", "memory_figure", "memory_table", "pareto_figure", "pareto_front",
    "pipeline_figure", "roofline_ceilings", "roofline_figure", "roofline_points",
    "save_figure", "throughput_latency_figure", "training_schedule", "training_trace",
]
