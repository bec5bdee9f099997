"""selfcheck (S8) through the API: its files are never overwritten without --force (the
refusal comes before any timing); the measured run itself is the suite's S8 test."""

import pytest

from perfcast.api import SelfCheckRequest, run
from perfcast.errors import InputError


def test_existing_files_are_refused_without_force(tmp_path):
    (tmp_path / "measurements.parquet").write_text("mine")
    with pytest.raises(InputError) as err:
        run(SelfCheckRequest.from_options(out=tmp_path, quick=True))
    assert err.value.field == "out" and "--force" in str(err.value)
    assert (tmp_path / "measurements.parquet").read_text() == "mine"


def test_bad_options_name_the_field():
    with pytest.raises(InputError) as err:
        run(SelfCheckRequest.from_options(device="tpu"))
    assert err.value.field == "device"
    with pytest.raises(InputError) as err:
        run(SelfCheckRequest.from_options(model="llama-2-70b"))
    assert err.value.field == "model"


def test_a_cnn_takes_no_seq_len(tmp_path):
    with pytest.raises(InputError) as err:
        run(SelfCheckRequest.from_options(model="resnet18", seq_len=16, out=tmp_path))
    assert err.value.field == "seq_len"
    assert not any(tmp_path.iterdir())  # refused before anything was timed or written
