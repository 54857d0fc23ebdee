"""vLLM as a kvtune backend, in parts: `build` (which vLLM is installed, the model it
serves), `flags` (the launcher: knobs, argv, container image), `screen` (its pre-screen and the
choices it offers) and `logs` (reading a failed start and the start-up facts). Callers import
from here; the parts stay small enough to read in one sitting.
"""

from kvtune.launchers.vllm.flags import ENV_THREADS_BIND, NAME, VllmLauncher, hf_shape, render_flags
from kvtune.launchers.vllm.installed import CPU, GPU, INSTALL_HINT, VllmBuild, detect_build, vllm_model
from kvtune.launchers.vllm.logs import classify_failure, parse_startup_log
from kvtune.launchers.vllm.screen import FP8_CPU_FLAGS, KV_RAM_FRACTION, THREADS_BIND, GiB, MiB
from kvtune.launchers.vllm.values import id_list, max_len_choices, parse_id_list

__all__ = [
    "CPU",
    "ENV_THREADS_BIND",
    "FP8_CPU_FLAGS",
    "GPU",
    "GiB",
    "INSTALL_HINT",
    "KV_RAM_FRACTION",
    "MiB",
    "NAME",
    "THREADS_BIND",
    "VllmBuild",
    "VllmLauncher",
    "classify_failure",
    "detect_build",
    "hf_shape",
    "id_list",
    "max_len_choices",
    "parse_id_list",
    "parse_startup_log",
    "render_flags",
    "vllm_model",
]
