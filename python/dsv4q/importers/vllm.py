"""Reader of vLLM intermediate-tensor logs (vLLM's own vllm/v1/intermediates/intermediates_logging.py and its
docs, contributing/intermediate_logging.md).

Format (as vLLM writes it): ``RUN_DIR/step_N/MODULE[_CALL]/FILE_DEVICE.pt``
with FILE ``inputs_I`` (positional inputs of the forward pre-hook, one file
per tensor), ``outputs`` (a tensor output) or ``outputs_I`` (a tuple), and
DEVICE the device name with ':' -> '_' (``cuda_0``). Each file is a bare
``torch.save`` of one tensor. The call of a tensor is its ``step_N``; the
importer's name for it is ``MODULE[_CALL]/FILE`` (device stripped), e.g.
``model.layers.3.attn/outputs``. One device is read (``device``: the
tensor-parallel rank's, default the first seen).
"""
from __future__ import annotations

import re
from pathlib import Path

from .._lib import DSV4QError

_FILE = re.compile(r"^(?P<file>(inputs|outputs|post_fwd_inputs)(_[A-Za-z0-9]+)*?)_(?P<dev>(cuda|cpu|xpu|hpu|npu|mps)(_\d+)?)$")


def read(src, device=None):
    """Yield (call, name, tensor, origin)."""
    import torch

    src = Path(src)
    steps = sorted((p for p in src.glob("step_*") if p.is_dir()), key=lambda p: int(p.name[5:]) if p.name[5:].isdigit() else -1)
    if not steps:
        raise DSV4QError("%s: no step_N directories (a vLLM intermediate-log run directory)" % src)
    for sd in steps:
        if not sd.name[5:].isdigit():
            raise DSV4QError("%s: step directory name is not step_<N>" % sd)
        for f in sorted(sd.glob("*/*.pt")):
            m = _FILE.match(f.stem)
            if not m:
                raise DSV4QError("%s: not a vLLM intermediate-log file name (inputs_I_DEVICE.pt / outputs_DEVICE.pt)" % f)
            if device is None:
                device = m.group("dev")
            if m.group("dev") != device:
                continue
            try:
                t = torch.load(str(f), map_location="cpu", weights_only=True)
            except Exception as e:
                raise DSV4QError("%s: torch.load failed: %s" % (f, e))
            yield int(sd.name[5:]), "%s/%s" % (f.parent.name, m.group("file")), t, str(f)
