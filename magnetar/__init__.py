"""Magnetar: a geo-replicated, Pulsar-compatible streaming system.

The component folders at the top of the repository import as subpackages of this one:
``bookie/`` is ``magnetar.bookie``, ``broker/`` is ``magnetar.broker`` and so on (architecture §2).
Docstrings cite the sections of the design, ``docs/architecture.md``, as "architecture §N".
"""

import os

#: the release, and the build's label when the environment names one: an image built with
#: ``images/build.sh --version-label LABEL`` sets MAGNETAR_VERSION_LABEL and its processes report
#: ``<release>+<label>`` (a PEP 440 local version), so two images of the same sources tell apart
__version__ = "0.1.0" + (f"+{label}" if (label := os.environ.get("MAGNETAR_VERSION_LABEL")) else "")


def discover(discover_system: bool = True) -> dict[str, object]:
    """Chaos Toolkit's entry point (``chaos discover magnetar --no-install``): the chaos lab's
    activities, from ``magnetar.chaos.discover``."""
    from magnetar.chaos import discover as discover_chaos

    return discover_chaos(discover_system)
