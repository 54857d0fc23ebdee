"""What both schedulers share: memory sizes in one unit for both, the CPUs a stored space needs,
and the worker's command line without the storage URL."""

import pytest

from kvtune.artifacts.cluster.job import WorkerJob, k8s_memory, parse_memory, slurm_memory, space_cpus
from kvtune.errors import SpecError


@pytest.mark.parametrize(
    ("text", "mib", "slurm", "k8s"),
    [
        ("64G", 65536, "64G", "64Gi"),
        ("64Gi", 65536, "64G", "64Gi"),
        ("64gb", 65536, "64G", "64Gi"),
        ("512M", 512, "512M", "512Mi"),
        ("1536Mi", 1536, "1536M", "1536Mi"),
        ("1T", 1024 * 1024, "1024G", "1024Gi"),
    ],
)
def test_a_size_means_the_same_bytes_to_slurm_and_kubernetes(text, mib, slurm, k8s):
    assert parse_memory(text) == mib
    assert (slurm_memory(mib), k8s_memory(mib)) == (slurm, k8s)


@pytest.mark.parametrize("text", ["64", "0G", "1.5G", "64K", "lots", "", "-1G"])
def test_other_sizes_are_refused_naming_the_forms(text):
    with pytest.raises(SpecError, match="--mem must be a whole number of M, G or T"):
        parse_memory(text)


def test_the_cpus_a_space_needs_are_its_most_threads():
    assert space_cpus(["parallel in [1, 2, 4]", "threads in [1, 12]", "batch-size in [256, 512]"]) == 12
    assert space_cpus(["threads in [2, 4, 16]"]) == 16  # a user's choices
    assert space_cpus(["threads = 6"]) == 6  # fixed
    assert space_cpus(["max-num-seqs in [8, 256]"]) is None  # no threads knob (vLLM): the user says


def test_the_worker_command_line_carries_no_storage_url():
    job = WorkerJob(study="s", workers=1, gpus_per_trial=1, worker_args=("--llama-server", "/x"))
    assert job.worker_argv("/runs") == [
        "kvtune",
        "worker",
        "--study",
        "s",
        "--gpus-per-trial",
        "1",
        "--runs-dir",
        "/runs",
        "--llama-server",
        "/x",
    ]
