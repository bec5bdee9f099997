"""Lazy loading of the library (issue 22, start-up time): the packages' public names load on
first use (PEP 562), so a command imports what it runs and no more. Each check runs in a
fresh interpreter, since this one has long imported everything."""

import importlib
import json
import subprocess
import sys

import pytest

LAZY = ("perfcast.api", "perfcast.comm", "perfcast.compose", "perfcast.kernels",
        "perfcast.ops", "perfcast.specs", "perfcast.train")
# COMMANDS' order when `import perfcast.api` imported every command module eagerly
# (`perfcast sweep --help` lists them in it).
ORDER = ["accel", "step", "measure", "calibrate", "serve", "capacity", "collective", "cpu",
         "diffusion", "infer", "rag", "selfcheck", "train"]


def _fresh(code: str) -> dict:
    """Run `code` in a fresh interpreter; it leaves its answer in `out` (a dict), which comes
    back with `modules`, the modules it imported."""
    probe = f"import json, sys\nout = {{}}\n{code}\nout['modules'] = sorted(sys.modules)\n" \
            "sys.stdout.write(json.dumps(out))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=True)
    return json.loads(done.stdout)


def _imported(modules: list[str], prefix: str) -> list[str]:
    return [m for m in modules if m == prefix or m.startswith(prefix + ".")]


@pytest.mark.parametrize("package", LAZY)
def test_importing_a_package_imports_none_of_its_modules(package):
    modules = _fresh(f"import {package}")["modules"]
    assert package in modules
    assert not _imported(modules, "pandas") and not _imported(modules, "scipy")
    assert [m for m in modules if m.startswith(package + "._")] == []


@pytest.mark.parametrize("module", ["perfcast.cli._infer", "perfcast.cli._serve",
                                    "perfcast.cli._step"])
def test_a_forecast_command_imports_no_fitting_nor_other_commands(module):
    """scipy.optimize (least-squares fits), training, accelerators and measurement are not a
    forecast's: importing an inference or serving command loads none of them."""
    modules = _fresh(f"import {module}")["modules"]
    for heavy in ("scipy", "perfcast.accel", "perfcast.measure", "perfcast.train._cnn",
                  "perfcast.train._forecast", "perfcast.api._calibrate", "perfcast.api._train"):
        assert not _imported(modules, heavy), heavy


def test_import_perfcast_cli_imports_no_pandas_nor_scipy():
    modules = _fresh("import perfcast.cli")["modules"]
    assert not _imported(modules, "pandas") and not _imported(modules, "scipy")
    assert "perfcast.api" not in modules


def test_fitting_imports_scipy_only_when_called():
    out = _fresh("from perfcast.comm import fit_link\n"
                 "from perfcast.kernels._fit import fit_family\n"
                 "out['before'] = 'scipy.optimize' in sys.modules\n"
                 "import numpy as np\n"
                 "n = np.array([2, 4, 8, 2, 4, 8, 2, 4, 8.0]); m = np.array([1e3] * 3 + [1e6] * 3 "
                 "+ [1e8] * 3)\n"
                 "fit_link('nvlink', n, m, 1e-5 + m / 1e11 * n, 3e11)\n"
                 "out['after'] = 'scipy.optimize' in sys.modules")
    assert out == {"before": False, "after": True, "modules": out["modules"]}


@pytest.mark.parametrize("first", ["ServeRequest", "InferRequest", "TrainRequest", "run"])
def test_commands_is_every_command_in_one_order_whatever_loaded_first(first):
    out = _fresh(f"from perfcast.api import {first}\n"
                 "from perfcast.api import COMMANDS\n"
                 "out['commands'] = list(COMMANDS)")
    assert out["commands"] == ORDER


def test_a_command_by_name_loads_its_module():
    out = _fresh("from perfcast.api import command_for, load_request, request_from_options\n"
                 "out['train'] = command_for('train').request.__name__\n"
                 "out['infer'] = type(request_from_options('infer', {'model': 'llama-2-7b', "
                 "'gpu': 'h100-sxm'})).__name__\n"
                 "out['serve'] = type(load_request({'command': 'serve', 'gpu': 'h100-sxm'}))"
                 ".__name__")
    assert (out["train"], out["infer"], out["serve"]) == (
        "TrainRequest", "InferRequest", "ServeRequest")


@pytest.mark.parametrize("package", LAZY)
def test_every_lazy_name_is_its_modules_object(package):
    """`from perfcast.x import Y` gives the object its module defines, and dir() lists it."""
    module = importlib.import_module(package)
    assert set(module.__all__) <= set(dir(module))
    for module_name, names in module._EXPORTS.items():
        source = importlib.import_module(f"{package}.{module_name}")
        for name in names:
            assert getattr(module, name) is getattr(source, name), (package, name)
    assert sorted(n for names in module._EXPORTS.values() for n in names) == sorted(
        module.__all__)


def test_an_unknown_name_is_an_attribute_error():
    import perfcast.api

    with pytest.raises(AttributeError, match="no attribute 'NoSuchRequest'"):
        perfcast.api.NoSuchRequest  # noqa: B018
    with pytest.raises(ImportError):
        from perfcast.kernels import no_such_name  # noqa: F401
