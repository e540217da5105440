"""Expert-partitioning policies: which of a GPU's activated experts run on its HBM-PIM.

``get_policy(name, **kwargs).decide(counts, ctx)`` with a :class:`~sievesim.costs.CostContext`.
Registered: ``sieve`` (the paper's greedy rule), ``noexp``, ``allexp``, ``pimoe``, ``naive``, ``oracle``, and ``overlap``
(ours, beyond the paper: docs/policies.md).
Add one with :func:`register_policy` (see docs/policies.md).
"""
from __future__ import annotations

from .base import Partition, Policy, available_policies, get_policy, policy_class, register_policy
from .baselines import DEFAULT_PIMOE_UNIT, PIMoE, AllExp, NaiveSplit, NoExp
from .oracle import Oracle
from .overlap import Overlap
from .sieve import Sieve, sieve_reference

__all__ = [
    "Partition", "Policy", "register_policy", "get_policy", "available_policies", "policy_class",
    "Sieve", "sieve_reference", "NoExp", "AllExp", "NaiveSplit", "PIMoE", "Oracle", "Overlap", "DEFAULT_PIMOE_UNIT",
]
