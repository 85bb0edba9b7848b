"""benchmarks/reference_check.py: our network against the authors' ``SAN`` on the same weights and batches.

Runs when a checkout of xinyiwu98/position-bias-in-attention is named by ``$POSBIAS_AUTHORS_CHECKOUT``
(their code is never copied into this repository); skipped otherwise.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "reference_check.py"
CHECKOUT = os.environ.get("POSBIAS_AUTHORS_CHECKOUT")


def test_a_directory_without_their_models_is_refused(tmp_path):
    proc = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path), "--depths", "2", "--steps", "0"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0 and "no models.py" in proc.stderr


@pytest.mark.skipif(not CHECKOUT, reason="set POSBIAS_AUTHORS_CHECKOUT to a checkout of the authors' repository")
def test_our_network_computes_and_trains_as_theirs(tmp_path):
    out = tmp_path / "ref.json"
    proc = subprocess.run([sys.executable, str(SCRIPT), CHECKOUT, "--depths", "2", "3", "--steps", "5", "--batch", "16",
                           "--configs", "causal/none", "decay/none", "full/sin", "causal/rope", "window|4/none",
                           "prefix|2/none", "--json", str(out)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rep = json.loads(out.read_text())
    assert rep["summary"]["networks"] == rep["summary"]["agree"] == 2 * 2 * 6
    assert rep["summary"]["worst_logit_diff"] < 1e-5
    assert all(max(r["final_loss_rel_diff"].values()) < 1e-4 for r in rep["rows"])
