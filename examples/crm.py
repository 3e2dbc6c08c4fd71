"""The examples' stand-in CRM: the customer record on file, as a ``@tool`` function.

``crm_lookup`` is trusted (a tool's default: the platform's own system of record); what it
returns is what a protected field's source rule ``tool://crm_lookup`` accepts. The payout and
the support examples both use it: importing either registers it with the executor.
"""

from __future__ import annotations

from typing import Any

from runplane.providers import tool

# The account on file per customer.
CUSTOMERS: dict[str, dict[str, Any]] = {
    "c-1": {"customer_id": "c-1", "name": "Ada Customer", "account": "NL91ABNA0417164300"}
}


@tool(mutating=False, recovery="retry", timeout_s=5)
def crm_lookup(customer_id: str) -> dict[str, Any]:
    """The customer's record on file (trusted: the platform's own system of record)."""
    found = CUSTOMERS.get(customer_id)
    return dict(found) if found is not None else {"customer_id": customer_id, "account": None}
