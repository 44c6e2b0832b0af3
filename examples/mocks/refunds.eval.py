"""An agent refunds an order through a mocked billing API (``mock.api``).

The right agent looks the order up and calls POST /refunds with its total; the wrong one only
says it did. The checks read the billing mock's call log, so saying is not enough.

    proctor eval examples/mocks/refunds.eval.py
"""

from pathlib import Path

from proctor import Verdict, assertion, case, mock, profile, suite, variant

AGENTS = Path(__file__).parent / "agents"
ORDERS = {"42": {"id": 42, "total": 30.0, "status": "paid"}}


def get_order(request, state):
    """A refund changes a later GET: the order's status lives in the trial's state."""
    orders = state.setdefault("orders", {k: dict(v) for k, v in ORDERS.items()})
    order = orders.get(request.params["id"])
    return order if order else mock.response(404, json={"error": "no such order"})


def create_refund(request, state):
    body = request.json or {}
    orders = state.setdefault("orders", {k: dict(v) for k, v in ORDERS.items()})
    order = orders.get(str(body.get("order_id")))
    if order is None:
        return mock.response(422, json={"error": "order_id names no order"})
    order["status"] = "refunded"
    state.setdefault("refunds", []).append(body)
    return mock.response(201, json={"id": f"re_{len(state['refunds'])}", **body})


billing = mock.api(
    "billing",
    routes={
        "GET /orders/{id}": get_order,
        "POST /refunds": create_refund,
        "GET /health": {"ok": True},
    },
)


def refunded_in_full(ctx) -> Verdict:
    refund = ctx.mocks["billing"].last("POST", "/refunds")
    if refund is None:
        return Verdict(False, "the agent never called POST /refunds")
    amount = (refund.json or {}).get("amount")
    return Verdict(amount == 30.0, f"refunded {amount!r} of 30.0")


refunds = suite(
    "mock-refunds",
    name="Refund through the billing API (mock.api)",
    prompt="Order {{order}} arrived broken. Refund it in full through the billing API at $BILLING_URL.",
    mocks=[billing],
    cases=[
        case(
            "refund-broken-order",
            variables={"order": "42"},
            validate=[
                refunded_in_full,
                assertion("called", "billing POST /refunds", name="called POST /refunds"),
                assertion(
                    "call-count",
                    {"call": "billing POST /refunds", "count": 1},
                    name="refunded once",
                ),
            ],
        )
    ],
    variants=[
        variant(
            "command", profile=profile("refunder", dir=str(AGENTS / "refunder"), run="bash run.sh")
        ),
        variant(
            "command",
            profile=profile("claims-only", dir=str(AGENTS / "claims-only"), run="bash run.sh"),
        ),
    ],
)
