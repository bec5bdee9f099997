"""The pipeline schedule diagram: stages top to bottom, time left to right, one box per
forward or backward task of each micro-batch (and model chunk when interleaved), as the
training forecast simulated it. Gaps in a stage's row are its bubble."""

from __future__ import annotations

from perfcast.report._figure import new_figure, time_unit
from perfcast.report._schedule import TrainSchedule

__all__ = ["pipeline_figure"]

_PASS_COLORS = {False: ("#4C72B0", "#8FAADC"), True: ("#DD8452", "#F2B88F")}  # by chunk parity
_LABEL_LIMIT = 48  # tasks per stage up to which each box carries its micro-batch number


def pipeline_figure(schedule: TrainSchedule, title: str | None = None):
    """One box per (stage, micro-batch, chunk, forward/backward) task at its simulated
    start and end (blue forward, orange backward, lighter for odd chunks), the tail after
    the pipeline (gradient reduction, optimizer) as grey boxes on its own row."""
    tasks, tail = schedule.tasks, schedule.tail
    end_s = float(tail["end_s"].max()) if len(tail) else schedule.makespan_s
    unit, factor = time_unit(end_s)
    fig, ax = new_figure(11.0, 1.2 + 0.55 * (schedule.stages + 1))
    per_stage = len(tasks) // max(schedule.stages, 1)
    shade = " (lighter: odd chunk)" if schedule.chunks > 1 else ""
    for backward in (False, True):
        rows = tasks[tasks["backward"] == backward]
        color = [_PASS_COLORS[backward][c % 2] for c in rows["chunk"]]
        ax.barh(rows["stage"], (rows["end_s"] - rows["start_s"]) * factor,
                left=rows["start_s"] * factor, height=0.8, color=color, edgecolor="black",
                linewidth=0.3, label=("backward" if backward else "forward") + shade,
                gid="backward" if backward else "forward")
    if per_stage <= _LABEL_LIMIT:
        for row in tasks.itertuples(index=False):
            ax.text((row.start_s + row.end_s) / 2 * factor, row.stage, str(row.micro_batch),
                    ha="center", va="center", fontsize=6)
    tail_row = schedule.stages
    for row in tail.itertuples(index=False):
        ax.barh([tail_row], [(row.end_s - row.start_s) * factor], left=[row.start_s * factor],
                height=0.5, color="0.75", edgecolor="black", linewidth=0.3, gid="tail")
    if len(tail):
        text = "; ".join(f"{r.name} {_seconds(r.end_s - r.start_s)}"
                         for r in tail.itertuples(index=False))
        ax.text(float(tail["start_s"].min()) * factor, tail_row, text + "  ", fontsize=7,
                ha="right", va="center")
    ax.set_yticks(list(range(schedule.stages)) + [tail_row],
                  [f"stage {s}" for s in range(schedule.stages)] + ["after pipeline"])
    ax.invert_yaxis()
    ax.set_xlabel(f"time ({unit})")
    fc = schedule.forecast
    chunks = f", {schedule.chunks} chunks/stage" if schedule.chunks > 1 else ""
    ax.set_title(title or f"{schedule.schedule}: {schedule.stages} stages x "
                 f"{schedule.micro_batches} micro-batches{chunks}; iteration "
                 f"{fc.iteration_time_s * factor:,.3g} {unit}, bubble {fc.bubble_fraction:.1%}",
                 fontsize=10)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.005, 1.0))
    ax.grid(True, axis="x", alpha=0.3)
    return fig


def _seconds(value_s: float) -> str:
    unit, factor = time_unit(value_s)
    return f"{value_s * factor:,.3g} {unit}"
