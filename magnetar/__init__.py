"""Magnetar: a geo-replicated, Pulsar-compatible streaming system.

The component folders at the top of the repository import as subpackages of this one:
``bookie/`` is ``magnetar.bookie``, ``broker/`` is ``magnetar.broker`` and so on (architecture §2).
Docstrings cite the sections of the design, ``docs/architecture.md``, as "architecture §N".
"""

__version__ = "0.1.0"


def discover(discover_system: bool = True) -> dict[str, object]:
    """Chaos Toolkit's entry point (``chaos discover magnetar --no-install``): the chaos lab's
    activities, from ``magnetar.chaos.discover``."""
    from magnetar.chaos import discover as discover_chaos

    return discover_chaos(discover_system)
