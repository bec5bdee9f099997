"""A reader that leaves early (`perfcast ... | head -1`) stops perfcast quietly: no
'internal error', no traceback, no 'Exception ignored' from the interpreter's last flush."""

from __future__ import annotations

import subprocess
import sys

import pytest

MAIN = "from perfcast.cli import main; main()"


@pytest.mark.parametrize("args", [["hardware", "show", "h100-sxm", "--json"], ["models"]])
def test_a_closed_pipe_ends_the_command_quietly(args):
    reader = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.close()"],
                              stdin=subprocess.PIPE)
    reader.wait()  # the reader has gone before perfcast writes a byte
    writer = subprocess.run([sys.executable, "-c", MAIN, *args], stdout=reader.stdin,
                            stderr=subprocess.PIPE, text=True, timeout=120)
    reader.stdin.close()
    assert writer.stderr == ""
    assert writer.returncode in (1, 141)  # rich's own handler exits 1; perfcast's 141
