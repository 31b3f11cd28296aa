"""Two gloo processes (torchrun) give the same adapter as one process with the same global batch."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest
import torch


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.long  # over 15 s on 2 cores: the long CI step keeps the default suite under 15 minutes
def test_torchrun_two_processes_match_single(tiny_base, tiny_data, tmp_path):
    from macaronic.engine.adapters import read_adapter
    from macaronic.engine.config import ModelArgs

    common = ["chat", "--data", str(tiny_data), "--base", str(tiny_base), "--steps", "3", "--batch", "4",
              "--lr", "5e-2", "--dtype", "float32", "--no-progress", "--save-every", "0"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    single = subprocess.run([sys.executable, "-m", "macaronic.cli", "train", *common, "--out", str(tmp_path / "one")],
                            env=env, capture_output=True, text=True, timeout=300)
    assert single.returncode == 0, single.stderr[-2000:]
    ddp = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
                          "--master_port", str(_free_port()), "-m", "macaronic.cli", "train", *common,
                          "--out", str(tmp_path / "two")], env=env, capture_output=True, text=True, timeout=300)
    assert ddp.returncode == 0, ddp.stderr[:3000] + "\n...\n" + ddp.stderr[-1500:]  # the head holds a rank's own error
    args = ModelArgs.from_dir(tiny_base)
    _, a = read_adapter(tmp_path / "one", args)
    _, b = read_adapter(tmp_path / "two", args)
    assert a.keys() == b.keys()
    diff = max((a[k][i] - b[k][i]).abs().max().item() for k in a for i in range(2))
    scale = max(a[k][1].abs().max().item() for k in a)
    assert scale > 1e-3  # B moved away from its zero init
    # Adam amplifies float summation-order noise in tiny grads: 1.0e-3 of the scale on an AMD EPYC
    # (just under on the Intel boxes); a batch of half the size, what an unsynced rank would train
    # on, lands 1.9x the scale away, so 1e-2 keeps two orders of magnitude between noise and a bug
    assert diff <= 1e-2 * scale
