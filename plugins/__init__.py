"""Built-in reward terms, one concern per module."""
