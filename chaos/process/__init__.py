"""Faults on the OS processes of a local cluster (``magnetar local up``)."""
