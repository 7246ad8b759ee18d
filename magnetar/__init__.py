"""Magnetar: a geo-replicated, Pulsar-compatible streaming system.

The component folders at the top of the repository import as subpackages of this one:
``bookie/`` is ``magnetar.bookie``, ``broker/`` is ``magnetar.broker`` and so on (DESIGN §2).
"""

__version__ = "0.1.0"
