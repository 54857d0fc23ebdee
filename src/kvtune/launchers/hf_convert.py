"""The demo model's GGUF -> Hugging Face conversion itself, run as a script in another interpreter.

The conversion needs torch, transformers, gguf and accelerate, which the vLLM interpreter has and
kvtune's own venv may not (the CPU build of vLLM lives in a venv of its own, and `make demo`
never installs torch). That interpreter may not have kvtune either, so this module imports
nothing from kvtune and nothing beyond the standard library at its top: hf_model.py runs its
source with ``python -c`` (no kvtune on that interpreter's path needed). The heavy imports are
inside `convert`, which only the child runs.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

MARKER = ".kvtune-converted.json"  # written last, inside the temporary folder, before the rename


def convert(gguf: Path, out: Path) -> None:
    """GGUF -> bfloat16 safetensors + tokenizer in `out`, the marker written last."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

    folder, name = str(gguf.parent), gguf.name
    model = AutoModelForCausalLM.from_pretrained(
        folder, gguf_file=name, quantization_config=GgufConfig(dequantize=True)
    )
    model = model.to(torch.bfloat16)
    model.config.dtype = torch.bfloat16
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config  # the weights are plain now; vLLM must not see GGUF
    model.save_pretrained(str(out))
    AutoTokenizer.from_pretrained(folder, gguf_file=name).save_pretrained(str(out))
    config = json.loads((out / "config.json").read_text())
    if "quantization_config" in config:
        del config["quantization_config"]
        (out / "config.json").write_text(json.dumps(config, indent=2))
    (out / MARKER).write_text(json.dumps({"source": str(gguf), "size": gguf.stat().st_size}))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: python hf_convert.py GGUF OUT_DIR")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    convert(Path(sys.argv[1]), Path(sys.argv[2]))
