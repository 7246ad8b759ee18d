"""Pieces every component shares: configuration, the metadata store, logging, the CLI plumbing."""
