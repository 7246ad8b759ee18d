"""Spark post-mortems of chaos-lab runs: disruption windows, duplicates, losses, reorders,
latency and throughput from the event log (architecture §6) and the Chaos Toolkit journal."""
