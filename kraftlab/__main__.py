"""`python -m kraftlab ...`: the same command as `kraftlab ...` (for an environment whose scripts
folder is not on PATH)."""

from kraftlab.cli import main

main(prog_name="kraftlab")
