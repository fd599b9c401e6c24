"""A data-frame workload with many temporaries: a join, group-bys and sorts, for cuDF or pandas.

Every step makes new columns and drops old ones, which is how data-frame code allocates: the chapter runs it
under different memory resources. The same functions run on pandas, so the CPU tests check the workload itself.
"""

from __future__ import annotations

import contextlib
import importlib
from dataclasses import dataclass

import numpy as np


@dataclass
class Tables:
    """Orders (one row per order) and customers (one row per customer) to join them with."""

    orders: object
    customers: object

    @property
    def rows(self) -> int:
        return len(self.orders)


def make_tables(rows: int, *, customers: int | None = None, seed: int = 0, frames=None) -> Tables:
    """``rows`` orders of ``customers`` customers (default ``rows // 10``), as cuDF frames unless ``frames`` is given.

    ``frames`` is the data-frame module (``cudf`` or ``pandas``); the random columns are made with NumPy from
    ``seed``, so both modules get the same data.
    """

    if rows < 1:
        raise ValueError(f"the workload needs at least one row, not {rows}")
    if frames is None:
        import cudf as frames
    customers = customers or max(1, rows // 10)
    rng = np.random.default_rng(seed)
    orders = frames.DataFrame(
        {
            "customer": rng.integers(0, customers, rows, dtype=np.int64),
            "amount": rng.gamma(2.0, 30.0, rows),
            "quantity": rng.integers(1, 20, rows, dtype=np.int32),
        }
    )
    people = frames.DataFrame(
        {
            "customer": np.arange(customers, dtype=np.int64),
            "region": rng.integers(0, 50, customers, dtype=np.int32),
            "discount": rng.uniform(0, 0.3, customers),
        }
    )
    return Tables(orders, people)


def _no_stages(name: str):
    return contextlib.nullcontext()


def revenue_by_region(tables: Tables, stage=_no_stages):
    """Join orders to customers, price them, total by customer and by region, and rank: many temporaries.

    Returns the regions sorted by revenue (a small frame), so the large temporaries are all freed by the end.
    ``stage(name)`` is entered around each step (``join``, ``price``, ``top customers``, ``by region``), for
    example a :class:`support.memory.observe.StagePeaks`.
    """
    with stage("join"):
        joined = tables.orders.merge(tables.customers, on="customer", how="inner")
    with stage("price"):
        joined["revenue"] = joined["amount"] * joined["quantity"] * (1 - joined["discount"])
    with stage("top customers"):
        by_customer = joined.groupby("customer").agg({"revenue": "sum", "quantity": "sum"})
        top = by_customer.sort_values("revenue", ascending=False).head(1000)
        del by_customer
    with stage("by region"):
        by_region = joined.groupby("region").agg({"revenue": "sum", "amount": "mean", "quantity": "max"})
        ranked = by_region.sort_values("revenue", ascending=False)
        ranked["top_customer_share"] = float(top["revenue"].sum()) / float(ranked["revenue"].sum())
    return ranked


def revenue_by_region_chunked(tables: Tables, chunks: int):
    """:func:`revenue_by_region` computed ``chunks`` slices of the orders at a time, then combined.

    Each slice is joined and totalled on its own, so only one slice's temporaries exist at once; per-customer
    totals are folded into running ones after each slice, per-region partial totals (sums, counts, maxima)
    combined at the end. The result equals the unchunked one.
    """
    if chunks < 1:
        raise ValueError(f"chunks must be at least 1, not {chunks}")
    orders, step = tables.orders, -(-len(tables.orders) // chunks)
    concat = _concat_of(orders)
    by_customer, region_parts = None, []
    for start in range(0, len(orders), step):
        joined = orders.iloc[start : start + step].merge(tables.customers, on="customer", how="inner")
        joined["revenue"] = joined["amount"] * joined["quantity"] * (1 - joined["discount"])
        part = joined.groupby("customer").agg({"revenue": "sum", "quantity": "sum"})
        # fold each slice's totals into the running ones at once, so only one table of customers is kept
        by_customer = part if by_customer is None else concat([by_customer, part]).groupby(level=0).sum()
        region_parts.append(
            joined.groupby("region").agg({"revenue": "sum", "amount": ["sum", "count"], "quantity": "max"})
        )
        del joined, part
    top = by_customer.sort_values("revenue", ascending=False).head(1000)
    parts = concat(region_parts)
    parts.columns = ["revenue", "amount_sum", "amount_count", "quantity"]
    totals = parts.groupby(level=0).agg(
        {"revenue": "sum", "amount_sum": "sum", "amount_count": "sum", "quantity": "max"}
    )
    ranked = totals[["revenue"]].copy()
    ranked["amount"] = totals["amount_sum"] / totals["amount_count"]
    ranked["quantity"] = totals["quantity"]
    ranked = ranked.sort_values("revenue", ascending=False)
    ranked["top_customer_share"] = float(top["revenue"].sum()) / float(ranked["revenue"].sum())
    return ranked


def _concat_of(frame):
    """``cudf.concat`` or ``pandas.concat``, whichever library ``frame`` belongs to."""

    return importlib.import_module(type(frame).__module__.split(".")[0]).concat
