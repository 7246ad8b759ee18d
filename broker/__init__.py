"""The Pulsar-protocol broker (DESIGN §2, §3): arrives with issue 3."""
