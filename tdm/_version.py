"""The library's version: recorded by every saved imputer and every benchmark result."""

__version__ = "0.22.0"
