"""Figure plumbing shared by every plot: a pyplot-free Figure, time units, and the one
function that writes a figure to disk (PNG or SVG, byte-identical for the same figure).

Figures are built with `matplotlib.figure.Figure` directly, never pyplot: no global state,
no GUI backend, nothing shown, so the plotting functions are safe in tests, servers and the
web UI. matplotlib is imported inside functions so `import perfcast` stays fast.
"""

from __future__ import annotations

from pathlib import Path

from perfcast.errors import InputError, check_output_file, writing

__all__ = ["FIGURE_FORMATS", "colors", "new_figure", "save_figure", "time_unit"]

FIGURE_FORMATS = (".png", ".svg")
_SVG_SALT = "perfcast"  # fixed ids in SVG output: the same figure gives the same bytes
_DPI = 150


def new_figure(width_in: float = 8.0, height_in: float = 5.0, rows: int = 1, cols: int = 1):
    """(Figure, axes) without pyplot; `axes` is one Axes or an array of them."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width_in, height_in), layout="constrained")
    return fig, fig.subplots(rows, cols, squeeze=True)


def colors(n: int) -> list:
    """n distinct colours (tab10, tab20 beyond ten) without pyplot's colour-cycle state."""
    from matplotlib import colormaps

    cmap = colormaps["tab10" if n <= 10 else "tab20"]
    return [cmap(i % cmap.N) for i in range(n)]


def time_unit(largest_s: float) -> tuple[str, float]:
    """(unit label, factor seconds are multiplied by) that keeps a time axis readable."""
    for label, factor in (("s", 1.0), ("ms", 1e3), ("us", 1e6)):
        if largest_s * factor >= 1.0:
            return label, factor
    return "us", 1e6


def save_figure(fig, path: str | Path) -> Path:
    """Write `fig` as PNG or SVG (by the path's suffix) and return the path. Refuses to
    overwrite an existing file or to write into a missing folder. Metadata carries no date
    and SVG element ids come from a fixed salt, so the same figure is byte-identical."""
    import matplotlib

    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in FIGURE_FORMATS:
        raise InputError("out", f"unknown figure format {path.suffix or '(none)'!r} of {path}",
                         FIGURE_FORMATS)
    check_output_file(path, "out")
    fmt = suffix.removeprefix(".")
    metadata = {"Date": None} if fmt == "svg" else {"Software": None}
    with (matplotlib.rc_context({"svg.hashsalt": _SVG_SALT, "svg.fonttype": "path"}),
          writing(path, "out")):
        fig.savefig(path, format=fmt, dpi=_DPI, metadata=metadata)
    return path
