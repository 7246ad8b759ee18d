"""Generated protobuf and gRPC modules (see ``proto/`` for the sources).

Nothing here is hand-written except this file and ``generate.py``. In a source checkout the
modules are regenerated on import when they are missing or older than the ``.proto`` files, so an
edit to a ``.proto`` can never be silently ignored.
"""

from magnetar.proto import generate as _generate

if _generate.is_stale():
    _generate.generate()
