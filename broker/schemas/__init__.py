"""The schema registry (Pulsar's SchemaRegistryService): schemas per topic with versions, kept in
the metadata store, and the compatibility checks that decide whether a new one may follow."""
