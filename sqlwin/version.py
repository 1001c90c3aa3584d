"""The package version, importable without importing the facade (streaming code checks it on a Connect server)."""

__version__ = "0.1.0"
