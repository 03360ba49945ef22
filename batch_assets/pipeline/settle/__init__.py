"""Settle: answers applied once, failures given their retry action, every item reconciled."""
