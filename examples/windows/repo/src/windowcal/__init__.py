"""windowcal: the next maintenance windows of a service, from its YAML schedule."""

from windowcal.config import ConfigError, load
from windowcal.windows import next_windows

__all__ = ["ConfigError", "load", "next_windows"]
