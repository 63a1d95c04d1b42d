"""Built-in camera drivers."""
