"""Transactions: the transaction coordinator, its __transaction_state log, and the transaction APIs."""
