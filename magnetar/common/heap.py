"""The garbage collector's settings for a long-running server.

A broker's imports alone leave about 75,000 objects the collector tracks and the process keeps
for life (modules, classes, protobuf descriptors, gRPC, aiohttp and kazoo internals). Left to
CPython's defaults, every full collection walks them all again, and a broker publishing 2,000
msg/s unbatched ran one every few seconds, with over 25 young collections a second, each
promoting the objects of the messages then in flight. So, once a server is up:

- what is alive then is collected once and frozen (``gc.freeze``): later collections skip it;
- the young generation is collected every ``YOUNG_THRESHOLD`` allocations instead of 700. A
  message's objects live for a few milliseconds; at 700 most of those in flight survive a young
  collection and are promoted, to be walked again by the older ones. The same holds for a broker
  taking over thousands of topics, whose opens, creates and first acknowledgements are all in
  flight for seconds: at 10,000 a namespace of 5,000 topics reloading ran about 150 young and 14
  middle collections, 3.3 to 4.4 s of its 14 to 21 s of CPU; at 100,000, 11 and 1, 1.5 s. Under
  2,000 msg/s it is one young collection every half minute or so instead of ten (as long as one
  middle collection), and the collector's total time over the same seconds is lower;
- a full collection may start after ``OLD_THRESHOLD`` collections of the middle generation
  instead of 10 (and still only once the objects promoted since the last one are a quarter of
  the old generation, CPython's own rule). A broker that loads thousands of topics at once (a
  bundle or namespace taken over) promotes each topic's objects, which met both conditions in
  the middle of the load: a full collection walks every topic's objects, a stall of one to three
  seconds with 6,000 topics on this 2-core machine under load, paid while clients wait to
  reconnect. At 100, loads of 1,000 and 5,000 topics ran none; the price is the garbage cycles
  left by opening topics, collected later (the broker's resident memory at rest 18.4 -> 24.7 KB a
  topic in bench_scale, still under the 30 KB target).
"""

from __future__ import annotations

import gc

#: container allocations (net of frees) between young collections; CPython's default is 700
YOUNG_THRESHOLD = 100_000
#: middle-generation collections before a full one may run; CPython's default is 10
OLD_THRESHOLD = 100


def settle() -> None:
    """Call once a server has started: collect, freeze what survives, raise the young and old
    thresholds."""
    gc.collect()
    gc.freeze()
    _, middle, _ = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, OLD_THRESHOLD)
