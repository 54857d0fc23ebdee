"""Where and how a study runs, as settings: the runs folder, the shared storage, workers, the
warm start, the launch script's address. Not part of the study's identity (the same study can
be run from another folder, by more workers, deployed on another port), so apart from
`StudySpec`; declared like every setting (kvtune/setting.py), so each is a study-file key and
`--set KEY=VALUE` too, and the everyday ones are flags of `kvtune run`."""

from __future__ import annotations

from dataclasses import dataclass

from kvtune.errors import SpecError
from kvtune.setting import setting


@dataclass(frozen=True)
class RunSettings:
    """How and where `kvtune run` executes a study (tuner/session.py `RunOptions` adds the
    study's own settings to these)."""

    runs_dir: str | None = setting(
        None,
        help="Where studies are stored (default ./kvtune-runs or $KVTUNE_RUNS_DIR).",
        run_flag="--runs-dir",
        panel="Output",
        what="a folder",
    )
    storage: str | None = setting(
        None,
        help="Optuna storage URL shared by workers, e.g. postgresql://user@db/kvtune or grpc://HOST:PORT of `kvtune proxy` (default: a SQLite file in the study's folder).",
        run_flag="--storage",
        panel="Study",
        what="a storage URL, e.g. postgresql://user@db/kvtune",
    )
    workers: int = setting(
        1,
        most=10_000,
        help="Trials at once on this host, each server pinned to its own CPUs / GPUs and port.",
        run_flag="--workers",
        panel="Cluster",
    )
    setup_only: bool = setting(
        False,
        help="Create the study in --storage (spec, baseline, budget) and run no trial: workers placed by Slurm or Kubernetes run it (see `kvtune export-workers`).",
        run_flag="--setup-only",
        panel="Cluster",
    )
    gpus_per_trial: int = setting(
        0,
        most=1024,
        help="GPUs each worker's server gets: worker k gets the k-th G of the visible GPUs (CUDA_VISIBLE_DEVICES, in PCI bus order), recorded with each trial; 0: leave CUDA_VISIBLE_DEVICES alone.",
        moved=("--gpus-per-trial",),
    )
    cpus_per_trial: int | None = setting(
        None,
        most=100_000,
        help="With setup_only: the CPUs each trial's server gets on the workers (default: this host's count); a worker with fewer is refused, one with more pins its servers to this many.",
        moved=("--cpus-per-trial",),
    )
    warm_start: str | None = setting(
        None,
        help="Start from the best configs of this study (e.g. one tuned on other hardware).",
        moved=("--warm-start",),
        what="a study's name",
    )
    warm_start_storage: str | None = setting(
        None,
        help="Storage URL of the warm_start study (default: storage, else that study's SQLite file).",
        moved=("--warm-start-storage",),
        what="a storage URL",
    )
    allow_mixed_hardware: bool = setting(
        False, help="Let a study hold trials measured on different hardware.", moved=("--allow-mixed-hardware",)
    )
    deploy_host: str = setting(
        "127.0.0.1",
        help="Address the launch script's server binds (tuning always binds 127.0.0.1).",
        moved=("--deploy-host",),
        what="the address the launch script binds, e.g. 0.0.0.0",
    )
    deploy_port: int = setting(8080, help="Port the launch script's server listens on.", moved=("--deploy-port",))
    hf_model: str | None = setting(
        None,
        help="The same model as an HF folder (with config.json) or hub id, for vLLM when model is its GGUF (several backends in one run).",
        moved=("--hf-model",),
        what="an HF folder or hub id",
    )

    def check_run_settings(self) -> None:
        """Each run setting on its own and with the others; a one-line SpecError naming the key."""
        if self.workers < 1:
            raise SpecError(f"workers must be at least 1, got {self.workers}")
        if self.gpus_per_trial < 0:
            raise SpecError(f"gpus_per_trial must be 0 or more, got {self.gpus_per_trial}")
        if self.setup_only and self.workers > 1:  # was silently nothing: a set-up runs no trial here
            raise SpecError(
                f"workers {self.workers} runs trials at once on this host, and --setup-only runs none here: drop it "
                "(kvtune export-workers --workers places the scheduler's workers)"
            )
        if self.cpus_per_trial is not None and not self.setup_only:
            raise SpecError(
                "cpus_per_trial sizes a study set up for a scheduler's workers: add --setup-only "
                "(a study run here splits this host's CPUs with --workers)"
            )
        if self.cpus_per_trial is not None and self.cpus_per_trial < 1:
            raise SpecError(f"cpus_per_trial must be at least 1, got {self.cpus_per_trial}")
        if self.warm_start_storage is not None and self.warm_start is None:
            raise SpecError(
                "warm_start_storage says where the warm_start study is, and no warm_start is given: "
                "set warm_start to that study's name, or drop warm_start_storage"
            )
        if not 1 <= self.deploy_port <= 65535:
            raise SpecError(f"deploy_port must be a TCP port, 1-65535, got {self.deploy_port}")
        if not self.deploy_host.strip():
            raise SpecError("deploy_host is empty: give the address the launch script binds, e.g. 0.0.0.0")
        if any(ch.isspace() for ch in self.deploy_host) or "/" in self.deploy_host:  # 'a b', 'http://x'
            raise SpecError(
                f"deploy_host {self.deploy_host!r} is not an address: give the one address the launch script "
                f"binds, e.g. 0.0.0.0 or 127.0.0.1 (no scheme, no blank)"
            )
