"""The shipped kernel-measurement store: load it, query it with SQL, turn rows into op rows."""

from __future__ import annotations

from functools import lru_cache
from importlib.resources import as_file, files
from pathlib import Path

import pandas as pd

from perfcast.kernels import kernel_source, measurement_ops
from perfcast.measure._schema import STORE_COLUMNS, check_measurements

__all__ = ["load_store", "query", "to_ops"]

_DATA = "data"  # the stores' folder inside the perfcast.measure package


def _read(path: Path) -> pd.DataFrame:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pq.read_table(path, columns=list(STORE_COLUMNS))
    strings = {pa.string(): pd.StringDtype(), pa.large_string(): pd.StringDtype()}
    df = table.to_pandas(types_mapper=strings.get)
    del table
    pa.default_memory_pool().release_unused()  # the Parquet decode buffers
    return check_measurements(df, str(path))


@lru_cache(maxsize=3)
def _shipped(source: str = "default") -> pd.DataFrame:
    name = f"{_DATA}/{kernel_source(source).store_file}"
    with as_file(files("perfcast.measure").joinpath(name)) as path:
        return _read(Path(path))


def load_store(path: str | Path | None = None, source: str = "default") -> pd.DataFrame:
    """The measurement table (STORE_COLUMNS, validated): a shipped one, or a Parquet file.

    `source` names the shipped store (perfcast.kernels.KERNEL_SOURCES: "default" =
    kernels.parquet, "vllm" / "sglang" = that framework's AIConfigurator kernel tables);
    an unknown name is an InputError listing the names. Each shipped table is read once per
    process; each call returns its own (copy-on-write) copy.
    """
    if path is None:
        return _shipped(kernel_source(source).name).copy(deep=False)
    return _read(Path(path))


def query(sql: str, store: pd.DataFrame | None = None) -> pd.DataFrame:
    """Run DuckDB SQL against the table `kernels` (the shipped store unless `store` is given)."""
    import duckdb

    kernels = _shipped() if store is None else store
    with duckdb.connect() as con:
        con.register("kernels", kernels)
        return con.execute(sql).df()


def to_ops(df: pd.DataFrame) -> pd.DataFrame:
    """Store rows as perfcast op-table rows (`perfcast.ops.COLUMNS`), one kernel each: the
    kernel layer's own conversion, so fitting and forecasting see identical rows."""
    return measurement_ops(df)
