"""Apache Pulsar's own processes (ZooKeeper, bookies, brokers of a released version) started on
loopback beside Magnetar's, for the chaos lab's side-by-side runs and the benchmarks."""
