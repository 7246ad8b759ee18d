"""The binary-protocol connection (architecture §3), Pulsar's ``ServerCnx`` in
``org.apache.pulsar.broker.service``: the ports connections are accepted on (``listeners.py``),
a client connection's read loop, CONNECT, LOOKUP and the authentication refresh
(``connection.py``, ``auth_refresh.py``), the producer, consumer and schema commands it hands off
(``producer_commands.py``, ``consumer_commands.py``, ``schema_commands.py``), given only a
``channel.py``, whether a topic takes another producer or consumer (``admission.py``) and which
``ServerError`` answers a failed command (``server_errors.py``)."""
