"""``magnetar local``: a Magnetar cluster of real processes on this machine, for the chaos lab, the
tests and the benchmarks.

One ZooKeeper server (each region's metadata store is a chroot on it, the shared configuration
store another), and per region its bookies and brokers, each a supervised OS process on
loopback. Everything a run starts is recorded in ``runs/<id>/cluster/state.json`` with its pid,
so ``down`` stops exactly those processes and nothing else.
"""
