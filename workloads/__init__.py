"""Everything about scenarios: the scenario model (scenario/: schema, loading, references), steps,
conditions, fault schedules, and the built-in scenario library (library/*.yaml)."""
