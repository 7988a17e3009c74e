"""The Slurm executor: jobs submitted to slurmctld through slurmrestd, followed, cancelled and reconciled."""
