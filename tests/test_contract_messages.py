"""Issue 69's misleading messages: each names what the user gave (the field, base, standard output)."""
from __future__ import annotations

import os

import pytest

from sievesim.cli import main
from sievesim.errors import ConfigError
from sievesim.system import simulate_step


def test_a_smoothing_factor_that_is_not_a_number_is_named():
    with pytest.raises(ConfigError, match=r"alpha = 'x': expected a smoothing factor"):
        simulate_step("qwen3-30b-a3b", alpha="x")


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero")
def test_a_base_that_is_not_a_file_names_base(tmp_path, capsys):
    hw = tmp_path / "hw.toml"
    hw.write_text('base = "/dev/zero"\n')
    assert main(["hardware", "show", str(hw)]) == 2
    err = capsys.readouterr().err
    assert "base = '/dev/zero'" in err and "regular file" in err


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_full_standard_output_is_named(capfd):
    import subprocess
    import sys
    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, "-m", "sievesim", "models"], stdout=full, stderr=subprocess.PIPE,
                              text=True)
    assert proc.returncode == 2
    assert "standard output: cannot write" in proc.stderr
