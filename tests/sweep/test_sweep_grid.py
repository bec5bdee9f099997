import pytest

from perfcast.errors import InputError
from perfcast.sweep import expand_grid, parse_assignment, parse_scalar, point_key


def test_grid_is_the_cartesian_product_in_key_order_last_key_fastest():
    points = expand_grid({"model": "m", "tp": 8}, {"tp": [1, 2], "gpu": ["a", "b", "c"]})
    assert [(p["tp"], p["gpu"]) for p in points] == [
        (1, "a"), (1, "b"), (1, "c"), (2, "a"), (2, "b"), (2, "c")]
    assert all(p["model"] == "m" for p in points)  # the base stays, the grid replaces tp


def test_empty_grid_is_the_base_alone():
    assert expand_grid({"a": 1}, {}) == [{"a": 1}]


@pytest.mark.parametrize("grid", [{"tp": []}, {"tp": 4}, {"tp": "1,2"}])
def test_bad_grid_values_name_the_option(grid):
    with pytest.raises(InputError, match=r"^grid\.tp"):
        expand_grid({}, grid)


def test_point_key_is_stable_and_order_free():
    a = {"command": "serve", "qps": 2.0, "gpu": "h100-sxm"}
    b = {"gpu": "h100-sxm", "command": "serve", "qps": 2.0}
    assert point_key(a) == point_key(b)
    # pinned: a key must not change between runs, machines or versions (resume depends on it)
    assert point_key(a) == "32bde8004c119f38"
    assert point_key({**a, "qps": 2}) != point_key(a)  # 2 and 2.0 are different points
    assert len({point_key({"x": i}) for i in range(1000)}) == 1000


@pytest.mark.parametrize("text,value", [("1", 1), ("2.5", 2.5), ("true", True),
                                        ("False", False), ("null", None),
                                        ("h100-sxm", "h100-sxm"), ("1e3", 1000.0)])
def test_parse_scalar(text, value):
    assert parse_scalar(text) == value and type(parse_scalar(text)) is type(value)


def test_parse_assignment_single_and_many():
    assert parse_assignment("prompt-tokens=128,2048", "set", many=False) == (
        "prompt_tokens", "128,2048")
    assert parse_assignment("tp=1,2,4", "grid", many=True) == ("tp", [1, 2, 4])
    assert parse_assignment("prompt_tokens=128,2048;256,4096", "grid", many=True) == (
        "prompt_tokens", ["128,2048", "256,4096"])
    with pytest.raises(InputError, match="^grid"):
        parse_assignment("tp", "grid", many=True)
    with pytest.raises(InputError, match="^grid"):
        parse_assignment("tp=", "grid", many=True)
