"""What the coordinators (groups, share groups, transactions) share: for now the Clock their
timers run on (clock.py)."""
