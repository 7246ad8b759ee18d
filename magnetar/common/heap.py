"""The garbage collector's settings for a long-running server.

A broker's imports alone leave about 75,000 objects the collector tracks and the process keeps
for life (modules, classes, protobuf descriptors, gRPC, aiohttp and kazoo internals). Left to
CPython's defaults, every full collection walks them all again, and a broker publishing 2,000
msg/s unbatched ran one every few seconds, with over 25 young collections a second, each
promoting the objects of the messages then in flight. So, once a server is up:

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
