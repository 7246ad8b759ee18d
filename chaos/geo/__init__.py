"""Chaos Toolkit activities of geo-replicated clusters: replicated namespaces, consumers that
fail over from one region to another."""
