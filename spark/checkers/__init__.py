"""The post-mortem's checkers, in Jepsen's terms (its Kafka, Redpanda and Bufstream queue
analyses), one idea per module; ``verdicts`` runs them all into one table of findings:

- ``lost_write``: acknowledged to its producer (``send_ok``), never received by a subscription
  that ran to the end;
- ``duplicate``: a message received more than once by one subscription;
- ``poll_skip``: a subscription that promises order jumped over messages it should have delivered
  next;
- ``nonmonotonic_poll``: a consumer went back in an ordered stream with no seek, negative
  acknowledgement, reconnection or redelivery to explain it;
- ``inconsistent_offsets``: one message with two payloads, or one position with two messages.

What a subscription promises follows its type (``streams``): Exclusive and Failover deliver each
producer's messages in order per partition, Key_Shared per key, Shared in no order (but loses
nothing, like every type). Each finding names its messages, its time and the fault active then
(``finding``).
"""
