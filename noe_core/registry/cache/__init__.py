"""The registry cache: the layers in front of the registry, their rows, SQLite and Redis levels."""
