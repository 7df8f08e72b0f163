"""Consumer groups (classic protocol): the group coordinator and the ``__consumer_offsets`` records."""
