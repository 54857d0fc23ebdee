"""Checks for the people who change kvtune (not used by a run): `python -m kvtune.devtools.arrows`."""
