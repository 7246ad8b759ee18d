"""The garbage collector's settings for a long-running server.

A server imports a few hundred thousand objects it keeps for life (modules, classes, protobuf
descriptors, gRPC and aiohttp internals). Left to CPython's defaults, every full collection walks
them all again: in a broker publishing 2,000 msg/s, full collections took about a quarter of a
second each and young ones stalled the loop a thousand times a minute. So, once a server is up:

- what is alive then is collected once and frozen (``gc.freeze``): later collections skip it;
- the young generation is collected every ``YOUNG_THRESHOLD`` allocations instead of 700. A
  message's objects live for a few milliseconds; at 700 most of those in flight survive a young
  collection and are promoted, to be walked again by the older ones.
"""

from __future__ import annotations

import gc

#: container allocations (net of frees) between young collections; CPython's default is 700
YOUNG_THRESHOLD = 10_000


def settle() -> None:
    """Call once a server has started: collect, freeze what survives, raise the young threshold."""
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, old)
