"""The version of kexp."""

__version__ = "0.1.0"
