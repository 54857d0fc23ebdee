"""Files that place a study's workers through a cluster scheduler: an sbatch job array (Slurm)
and an Indexed Job (Kubernetes). Pure rendering: `job.WorkerJob` in, text out."""
