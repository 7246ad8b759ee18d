"""The chaos lab: Chaos Toolkit extension, experiments, workload generator (issue 5)."""
