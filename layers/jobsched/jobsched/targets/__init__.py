"""Job handlers: code registered by name. A job item names a handler; nothing from an item is
ever imported or evaluated."""
