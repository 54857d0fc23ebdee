"""`python -m kvtune.cli` (how workers are spawned and tests call the CLI)."""

from kvtune.cli import main

main()
