"""scripts/build_hardware_catalog.py rebuilds the shipped gpus.json exactly: the entries from
../shared/data, the per-GCD MI250/MI250X split and the hand-entered parts it merges in."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "build_hardware_catalog.py"
SHARED = REPO.parent / "shared" / "data"
GPUS = REPO / "src" / "perfcast" / "specs" / "data" / "gpus.json"
HAND = REPO / "scripts" / "data" / "gpus_hand_entered.json"


@pytest.mark.skipif(not (SHARED / "hardware" / "gpus.csv").is_file(),
                    reason="shared data not here")
def test_rebuild_equals_shipped_file(tmp_path):
    out = tmp_path / "gpus.json"
    done = subprocess.run([sys.executable, str(SCRIPT), str(SHARED), str(out)], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert out.read_text() == GPUS.read_text()


def test_hand_entered_entries_are_shipped_unchanged():
    shipped = {e["device"]["name"]: e for e in json.loads(GPUS.read_text())["devices"]}
    order = list(shipped)
    for item in json.loads(HAND.read_text())["devices"]:
        entry = {k: v for k, v in item.items() if k != "after"}
        name = entry["device"]["name"]
        assert shipped[name] == entry
        assert order.index(name) == order.index(item["after"]) + 1
