"""Govern: what may leave the machine and what it costs (sensitive data, send gate, budgets, dry runs),
retention, review and revoke."""
