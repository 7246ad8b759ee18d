"""Apache Pulsar's processes for the benchmarks: the launcher is the chaos lab's
(magnetar.chaos.apache_pulsar.processes, which ``magnetar chaos compare`` runs); this name stays
so bench scripts import it as before and its command line works from here too.

    .venv/bin/python bench/pulsar/apache_pulsar.py cluster --dir runs/pulsar-cluster --brokers 2
"""

from __future__ import annotations

from magnetar.chaos.apache_pulsar.processes import (
    VERSION,
    ApachePulsar,
    Endpoints,
    PulsarUnavailableError,
    fetch,
    main,
)

__all__ = ["VERSION", "ApachePulsar", "Endpoints", "PulsarUnavailableError", "fetch", "main"]

if __name__ == "__main__":
    main()
