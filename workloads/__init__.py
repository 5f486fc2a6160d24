"""Scenario steps and conditions, and the built-in scenario library (library/*.yaml)."""
