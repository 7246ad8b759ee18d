"""The Pulsar binary protocol: framing (``frames.py``) and command builders (``commands.py``)."""
