"""Bad input, told apart from bugs: the CLI turns `AnalysisInputError` into exit code 2 and its
message (which names the path and what was expected); anything else is a bug and stays loud."""

from __future__ import annotations


class AnalysisInputError(Exception):
    """The run directory cannot be analyzed as given: the message says which path and why."""
