"""Bundle moves through the admin REST API (Pulsar-compatible): unloads and transfers."""
