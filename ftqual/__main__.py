"""`python -m ftqual`: runs `ftqual.cli.entry`."""

from ftqual.cli import entry

entry()
