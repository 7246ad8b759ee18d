"""The chaos lab's workload: producers and consumers on the official Pulsar client that write
the event log of architecture §6, so a post-mortem can tell what clients saw during faults. It works
against any Pulsar-protocol service URL, Magnetar's or Apache Pulsar's."""
