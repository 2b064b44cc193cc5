from ftqual.cli import entry

entry()
