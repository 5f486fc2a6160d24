"""`python -m kraftlab` is the `kraftlab` command (for an environment whose scripts are not on PATH)."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_python_dash_m_kraftlab_is_the_command_with_its_exit_codes():
    done = subprocess.run([sys.executable, "-m", "kraftlab", "run", "no-such-scenario"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "no-such-scenario" in done.stderr and "no such file or library scenario" in done.stderr
