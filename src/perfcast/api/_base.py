"""Requests, results and the one `run`: the application layer every face calls.

A request is a frozen pydantic model of one question, composed of option groups (model,
hardware, plan, precision, workload, ...). Each group's fields are the command's options: a
field's *option name* (its alias, else its name) is the CLI flag without dashes and the key a
scenario file, a sweep point or a UI form uses, so `from_options` turns any of those flat
mappings into the same request, and `options()` gives the mapping back.

`resolve(request)` turns names and flags into specs and picks every default (kernel model,
collective model, host overhead, execution mode) in one place; `run(request)` executes what
`resolve` produced and returns a result whose `payload()` is exactly what `--json` prints.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any, ClassVar, Generic, Protocol, TypeVar, get_args, get_origin

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from perfcast.errors import InputError, close_matches
from perfcast.progress import ProgressFn, reporting

__all__ = ["COMMANDS", "COMMAND_NAMES", "Command", "Group", "Request", "Result", "all_commands",
           "command_for", "dump_request", "load_request", "register", "request_from_options",
           "resolve", "run", "run_options"]


def _is_text(annotation: Any) -> bool:
    """A field that holds text (`str`, `str | None`), not a number too."""
    kinds = set(get_args(annotation)) if get_origin(annotation) is not None else {annotation}
    return str in kinds and not kinds & {int, float, bool}


def _numbers_as_text(cls: type[BaseModel], data: Any) -> Any:
    """A number given for a text option (`--set prompt_tokens=2048`, `tp: 4` or `bytes: 1e6`
    in a scenario YAML) is the text it spells: text options hold numbers (`N or LO,HI`,
    `2,4,8`, `64MiB`), and YAML and `NAME=VALUE` read an unquoted number as one."""
    if not isinstance(data, Mapping):
        return data
    out = dict(data)
    for name, field in cls.model_fields.items():
        for key in {name, field.alias or name}:
            value = out.get(key)
            if (isinstance(value, int | float) and not isinstance(value, bool)
                    and _is_text(field.annotation)):
                out[key] = str(value)
    return out


class Group(BaseModel):
    """A group of a request's options (a model choice, the hardware, the plan, ...)."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    @model_validator(mode="before")
    @classmethod
    def _text_options(cls, data: Any) -> Any:
        return _numbers_as_text(cls, data)


def _group_type(annotation: Any) -> type[Group] | None:
    """The Group class a field holds (also through `Group | None`), else None."""
    candidates = get_args(annotation) if get_origin(annotation) is not None else (annotation,)
    for c in candidates:
        if isinstance(c, type) and issubclass(c, Group):
            return c
    return None


def _option_name(name: str, field: Any) -> str:
    return field.alias or name


class Request(BaseModel):
    """One question to perfcast. Subclasses set `command` and compose option groups."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)
    command: ClassVar[str]

    @model_validator(mode="before")
    @classmethod
    def _text_options(cls, data: Any) -> Any:
        return _numbers_as_text(cls, data)

    @classmethod
    @cache
    def option_paths(cls) -> dict[str, tuple[str, str | None]]:
        """Option name -> (the request's field, the group's field or None for a top-level
        option). Option names are unique within a request (tested)."""
        paths: dict[str, tuple[str, str | None]] = {}

        def add(option: str, path: tuple[str, str | None]) -> None:
            if option in paths:
                raise TypeError(f"{cls.__name__}: option {option!r} in {paths[option]} "
                                f"and {path}")
            paths[option] = path

        for name, field in cls.model_fields.items():
            group = _group_type(field.annotation)
            if group is None:
                add(_option_name(name, field), (name, None))
                continue
            for leaf, leaf_field in group.model_fields.items():
                add(_option_name(leaf, leaf_field), (name, leaf))
        return paths

    @classmethod
    @cache
    def _option_fields(cls) -> dict[str, Any]:
        """Option name -> its pydantic FieldInfo (a class's fields never change: once)."""
        out = {}
        for option, (top, leaf) in cls.option_paths().items():
            field = cls.model_fields[top]
            if leaf is not None:
                field = _group_type(field.annotation).model_fields[leaf]
            out[option] = field
        return out

    @classmethod
    def option_types(cls) -> dict[str, Any]:
        """Option name -> its declared type (for parsing `--set name=value` strings)."""
        return {option: f.annotation for option, f in cls._option_fields().items()}

    @classmethod
    def option_defaults(cls) -> dict[str, Any]:
        """Option name -> its default, for the options that have one (forms, help, tests)."""
        return {option: f.get_default(call_default_factory=True)
                for option, f in cls._option_fields().items() if not f.is_required()}

    @classmethod
    def from_options(cls, options: Mapping[str, Any] | None = None, /, **more: Any):
        """The request from flat options (CLI flag names, dashes or underscores): what a
        scenario file, a sweep point, a UI form and a command line all give."""
        given = {**(options or {}), **more}
        paths = cls.option_paths()
        nested: dict[str, Any] = {}
        for raw, value in given.items():
            key = str(raw).replace("-", "_")
            cls.check_option(key, str(raw))
            top, leaf = paths[key]
            if leaf is None:
                nested[top] = value
            else:
                nested.setdefault(top, {})[key] = value
        return cls.validated(nested)

    @classmethod
    def check_option(cls, key: str, field: str | None = None) -> None:
        """`key` is one of this request's option names, else an InputError naming `field`
        (default: the key) with the closest names."""
        paths = cls.option_paths()
        if key not in paths:
            hint = close_matches(key, paths)
            problem = f"{cls.command} has no option {key!r}" + (
                f"; did you mean {hint[0]}?" if hint else "")
            raise InputError(field or key, problem, sorted(paths))

    @classmethod
    def validated(cls, data: Mapping[str, Any]):
        """`model_validate`, with a validation error as an InputError naming the option."""
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise _input_error(cls, exc) from None

    @classmethod
    @cache
    def _compared_defaults(cls) -> dict[str, Any]:
        """`option_defaults`, built once per class for `first_given`, which only compares
        with them (option_defaults itself builds fresh values for callers that keep them)."""
        return cls.option_defaults()

    def first_given(self, *options: str) -> str | None:
        """The first of `options` this request sets to other than its default (an option a
        question does not read is refused by name, never ignored). Reads those options only:
        resolving a request asks this many times."""
        defaults = self._compared_defaults()
        return next((o for o in options if self._option(o) != defaults[o]), None)

    def options(self) -> dict[str, Any]:
        """The flat options this request was (or could have been) made from."""
        return {option: self._option(option) for option in self.option_paths()}

    def _option(self, option: str) -> Any:
        """One flat option's value: its top-level field, or that group's field."""
        top, leaf = self.option_paths()[option]
        value = getattr(self, top)
        return value if leaf is None else getattr(value, leaf)


_BOUNDS = {"greater_than_equal": ("ge", ">="), "greater_than": ("gt", ">"),
           "less_than_equal": ("le", "<="), "less_than": ("lt", "<")}


def _range_problem(err: Mapping[str, Any]) -> tuple[str, str] | None:
    """(problem, allowed) of a value outside a declared range: `must be >= 1, got 0`."""
    kind = _BOUNDS.get(err["type"])
    if kind is None:
        return None
    bound = err["ctx"][kind[0]]
    shown = f"{bound:,}" if isinstance(bound, int) and abs(bound) >= 10_000 else f"{bound}"
    return f"must be {kind[1]} {shown}, got {err.get('input')!r}", f"{kind[1]} {shown}"


def _input_error(cls: type[Request], exc: ValidationError) -> InputError:
    """The first error, named by its option (the flag a user typed), not pydantic's path;
    an InputError a validator raised is passed on as it is."""
    err = exc.errors()[0]
    raised = (err.get("ctx") or {}).get("error")
    if isinstance(raised, InputError):
        return raised
    loc = [str(p) for p in err["loc"]]
    msg = err["msg"].removeprefix("Value error, ")
    names = {(top, leaf): option for option, (top, leaf) in cls.option_paths().items()}
    field = None
    if len(loc) >= 2:
        field = next((o for (t, leaf), o in names.items() if t == loc[0] and
                      (leaf == loc[1] or o == loc[1])), None)
    if field is None and loc:
        field = names.get((loc[0], None), ".".join(loc))
    value = err.get("input")
    if err["type"] == "missing":
        return InputError(field or cls.command, f"`{cls.command}` needs this option")
    ranged = _range_problem(err)
    if ranged is not None:
        return InputError(field or cls.command, *ranged)
    shown = f"{value!r} is not valid for `{cls.command}`: " if not isinstance(
        value, Mapping) else ""
    return InputError(field or cls.command, shown + msg)


class Result(Protocol):
    """What `run` returns: rich objects for Python callers, plus the `--json` payload."""

    request: Request

    def payload(self) -> dict[str, Any]:
        """Exactly what `perfcast <command> ... --json` prints, as a dict."""
        ...


R = TypeVar("R", bound=Request)


@dataclass(frozen=True)
class Command(Generic[R]):
    """One question perfcast answers: its request type and how to run it.

    `resolve` turns the request into specs (the only place defaults are chosen);
    `execute` runs the resolved question and returns its result."""

    request: type[R]
    resolve: Callable[[R], Any]
    execute: Callable[[Any], Result]

    @property
    def name(self) -> str:
        return self.request.command


COMMANDS: dict[str, Command] = {}

# Every command and the module of perfcast.api that registers it, in COMMANDS' order (the
# order `import perfcast.api` registered them in when it imported every module eagerly).
_COMMAND_MODULES = {
    "accel": "_accel", "step": "_step", "measure": "_measure", "calibrate": "_calibrate",
    "serve": "_serve", "capacity": "_capacity", "collective": "_collective", "cpu": "_cpu",
    "diffusion": "_diffusion", "infer": "_infer", "rag": "_rag", "selfcheck": "_selfcheck",
    "train": "_train"}
# The commands' names, in that order, without importing them (`perfcast sweep --help`).
COMMAND_NAMES = tuple(_COMMAND_MODULES)
_all_loaded = False


def all_commands() -> dict[str, Command]:
    """COMMANDS with every command registered: the modules of perfcast.api load lazily, a
    command's on first use, so the whole table imports them all (once), in their order."""
    global _all_loaded
    if not _all_loaded:
        for module in _COMMAND_MODULES.values():
            importlib.import_module(f"perfcast.api.{module}")
        others = {k: v for k, v in COMMANDS.items() if k not in _COMMAND_MODULES}
        ordered = {k: COMMANDS[k] for k in _COMMAND_MODULES}
        COMMANDS.clear()
        COMMANDS.update(ordered | others)
        _all_loaded = True
    return COMMANDS


def register(request: type[R], resolve_fn: Callable[[R], Any],
             execute: Callable[[Any], Result]) -> Command[R]:
    """Declare a command (called once per command module, at import)."""
    command = Command(request, resolve_fn, execute)
    COMMANDS[request.command] = command
    return command


def command_for(name: str) -> Command:
    """The command named `name` (importing only its module), or an InputError listing the
    commands."""
    if name not in COMMANDS and name in _COMMAND_MODULES:
        importlib.import_module(f"perfcast.api.{_COMMAND_MODULES[name]}")
    if name not in COMMANDS:
        all_commands()
    if name not in COMMANDS:
        hint = close_matches(name, COMMANDS)
        problem = f"unknown command {name!r}" + (f"; did you mean {hint[0]}?" if hint else "")
        raise InputError("command", problem, sorted(COMMANDS))
    return COMMANDS[name]


def _command_of(request: Request) -> Command:
    if not isinstance(request, Request):
        raise InputError("request", f"expected a perfcast request, got {type(request).__name__}",
                         sorted(c.request.__name__ for c in all_commands().values()))
    return command_for(request.command)


def _spec_error(request: Request, exc: ValidationError) -> InputError:
    """A spec's validation error (a plan, a cluster) named by the request's option it comes
    from where one matches (its field, or the first word of its message), else the command."""
    err = exc.errors()[0]
    msg = err["msg"].removeprefix("Value error, ")
    words = [str(p) for p in err["loc"]] + msg.split()[:1]
    names = {w.removesuffix("_stage"): w for w in words}  # ParallelPlan's zero_stage: --zero
    options = request.option_paths()
    field = next((n for n in names if n in options), request.command)
    return InputError(field, msg)


def resolve(request: Request) -> Any:
    """The request's names and flags as specs, with every default chosen; a spec that
    refuses them raises an InputError too."""
    command = _command_of(request)
    try:
        return command.resolve(request)
    except ValidationError as exc:
        raise _spec_error(request, exc) from None


def run(request: Request, progress: ProgressFn | None = None) -> Result:
    """Answer one question: resolve the request, then run it. Long work (a serve run's
    requests, a measurement sweep, a capacity or training-plan search) reports
    `progress(done, total)` as it goes (`perfcast.progress`); other questions never call it."""
    command = _command_of(request)
    resolved = resolve(request)
    try:
        with reporting(progress):
            return command.execute(resolved)
    except ValidationError as exc:
        raise _spec_error(request, exc) from None


def request_from_options(command: str, options: Mapping[str, Any]) -> Request:
    """The request of `command` from flat options (a scenario's, a sweep point's)."""
    return command_for(command).request.from_options(options)


def run_options(command: str, options: Mapping[str, Any]) -> Result:
    """`run` of the request `command` builds from flat options: what a scenario run, a
    sweep point and a UI form ask. Bad names or values raise InputError naming the option."""
    return run(request_from_options(command, options))


def dump_request(request: Request) -> dict[str, Any]:
    """A request as plain JSON/YAML data: its command and its nested groups."""
    return {"command": request.command,
            **request.model_dump(mode="json", by_alias=True, exclude_defaults=True)}


def load_request(data: Mapping[str, Any]) -> Request:
    """A request from `dump_request`'s data (nested groups) or from flat options, either
    with a `command` key."""
    data = dict(data)
    name = data.pop("command", None)
    if not isinstance(name, str):
        raise InputError("command", "a request needs its command", sorted(all_commands()))
    cls = command_for(name).request
    nested = any(k in cls.model_fields and isinstance(v, Mapping) for k, v in data.items())
    return cls.validated(data) if nested else cls.from_options(data)
