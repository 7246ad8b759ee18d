"""Probes over topics, through the admin REST API (Pulsar's paths, so they work on Apache Pulsar)."""
