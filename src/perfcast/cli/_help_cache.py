"""`perfcast --help` replayed from its last rendering, without importing typer or rich.

Typer renders the top-level help through rich: ~0.25 s of imports, most of the command's
time (issue 22: `perfcast --help` <= 0.3 s). The text is a pure function of what the
rendering reads: the invocation and program name, the CLI's source files, the installed typer
and rich, the Python, the terminal (which standard streams are terminals, its size, the
output encoding) and the environment variables rich and typer consult (colour, width,
terminal kind). `stored` hashes all of that into a key, the name of the rendering's file;
`replay` writes that file when it is on disk and reports True. Otherwise `main` runs typer
as before inside `recording`, which keeps what typer wrote to stdout and stores it in that
file when the command exits 0 having written nothing to stderr. So the replay is typer's own
output, byte for byte (tests/cli/test_help_cache.py compares the two across terminals and
environments).

Standard library only: this runs before anything else is imported. Copies live in
`perfcast._cache.cache_dir()/help` (`PERFCAST_CACHE_DIR=` turns them off); where they cannot
be written, typer renders every time. The newest KEEP renderings are kept.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import io
import json
import os
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from perfcast import __version__
from perfcast._cache import cache_dir, write_atomically

__all__ = ["REPLAYED", "help_key", "recording", "replay", "stored"]

FORMAT = 1  # bump when what a rendering depends on changes
REPLAYED = (("--help",),)  # the invocations replayed (their output depends on no option)
KEEP = 16
# Environment variables rich (console.py), typer (rich_utils.py, core.py) and click read:
# colour, width and terminal kind; anything that looks like one is part of the key.
_ENV = re.compile(r"COLOU?R|TERM|TTY|COLUMNS|LINES|WIDTH|RICH|TYPER|CLICK|JUPYTER|"
                  r"DATABRICKS|GITHUB_ACTIONS|UNICODE|PERFCAST")
_SOURCES = Path(__file__).parent  # the CLI's modules: every command's summary and panel


def help_key(args: tuple[str, ...]) -> str | None:
    """The key of `perfcast ARGS`'s rendering in this process's terminal and environment;
    None when ARGS is not replayed or a shell completion is asking (click's `_*_COMPLETE`)."""
    if args not in REPLAYED or any(k.endswith("_COMPLETE") for k in os.environ):
        return None
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    parts = {
        "format": FORMAT, "perfcast": __version__, "python": sys.version,
        "platform": sys.platform, "args": args, "argv0": sys.argv[0] if sys.argv else "",
        "main": [getattr(main, "__package__", None), getattr(spec, "name", None)],
        "sources": _sources_digest(), "libraries": [_installed(n) for n in ("typer", "rich")],
        "streams": _streams(), "env": {k: v for k, v in sorted(os.environ.items())
                                       if _ENV.search(k)},
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:32]


def stored(args: tuple[str, ...]) -> Path | None:
    """Where the rendering of `perfcast ARGS` is (or would be) stored; None when ARGS is
    not replayed or the cache is turned off."""
    folder = cache_dir()
    key = help_key(args) if folder is not None else None
    return None if key is None else folder / "help" / f"{key}.txt"


def replay(path: Path | None) -> bool:
    """Write the rendering stored at `path` (`stored`) to stdout; False when there is none."""
    if path is None:
        return False
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:  # the reader left: end as rich's Console.on_broken_pipe does
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise SystemExit(1) from None
    return True


@contextmanager
def recording(path: Path | None) -> Iterator[None]:
    """Run the block (typer rendering the help `path` is for) with stdout and stderr recorded;
    store stdout's text at `path` when it exits 0 (or returns) and wrote nothing to stderr
    (None: run it as it is)."""
    if path is None:
        yield
        return
    out, err = _Tee(sys.stdout), _Tee(sys.stderr)
    sys.stdout, sys.stderr = out, err
    ok = False
    try:
        yield
        ok = True
    except SystemExit as stop:
        ok = stop.code in (0, None)
        raise
    finally:
        sys.stdout, sys.stderr = out.stream, err.stream
        if ok and not err.text.getvalue() and out.text.getvalue():
            _store(path, out.text.getvalue())


def _sources_digest() -> str:
    digest = hashlib.sha256()
    for path in sorted(_SOURCES.glob("*.py")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def _installed(name: str) -> list:
    """Where `name` is installed and its package file's size and time: a new version (or
    another install on the path) is another key."""
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None:
        return [name, None]
    stat = os.stat(spec.origin)
    return [name, spec.origin, stat.st_size, stat.st_mtime_ns]


def _streams() -> dict:
    """What rich measures of the terminal: which standard streams are terminals, the size of
    the first that has one (rich asks stdin, stdout, stderr in that order) and the
    output encoding."""
    ttys, size = [], None
    for stream in (sys.stdin, sys.stdout, sys.stderr):
        try:
            fd = stream.fileno()
            ttys.append(os.isatty(fd))
            if size is None:
                size = tuple(os.get_terminal_size(fd))
        except (AttributeError, ValueError, OSError, io.UnsupportedOperation):
            ttys.append(None)
    encoding = getattr(sys.stdout, "encoding", None)
    return {"ttys": ttys, "size": size, "encoding": encoding}


def _store(path: Path, text: str) -> None:
    """Write atomically (a reader sees the whole rendering or none); keep the newest KEEP."""
    if not write_atomically(path, lambda out: out.write(text.encode("utf-8"))):
        return
    with contextlib.suppress(OSError):
        renderings = sorted(path.parent.glob("*.txt"), key=lambda p: p.stat().st_mtime_ns)
        for old in renderings[:-KEEP]:
            old.unlink(missing_ok=True)


class _Tee:
    """A text stream that writes through to `stream` and keeps a copy; everything else
    (isatty, fileno, encoding, ...) is the stream's own, so rich sees the same terminal."""

    def __init__(self, stream) -> None:
        self.stream, self.text = stream, io.StringIO()

    def write(self, s: str) -> int:
        self.text.write(s)
        return self.stream.write(s)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str):
        return getattr(self.stream, name)
