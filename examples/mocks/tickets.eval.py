"""An agent opens a support ticket through a mocked MCP server (``mock.mcp``).

The server exposes ``create_ticket`` (its JSON schema comes from the function's parameters);
the right agent calls it, the wrong one only says it did.

    proctor eval examples/mocks/tickets.eval.py
"""

from pathlib import Path

from proctor import assertion, case, mock, profile, suite, variant

AGENTS = Path(__file__).parent / "agents"


def create_ticket(title: str, priority: str = "normal", state=None):
    """Open a support ticket; returns its id."""
    state["opened"] = state.get("opened", 0) + 1
    return {"id": f"T-{state['opened']}", "title": title, "priority": priority}


def list_tickets(state=None):
    """The tickets opened so far."""
    return {"count": state.get("opened", 0)}


tickets = mock.mcp("tickets", tools={"create_ticket": create_ticket, "list_tickets": list_tickets})


def opened_a_high_priority_ticket(ctx) -> bool:
    call = ctx.mocks["tickets"].last("create_ticket")
    return call is not None and call.arguments.get("priority") == "high"


tickets_suite = suite(
    "mock-tickets",
    name="Open a ticket through an MCP server (mock.mcp)",
    prompt="The printer on floor 3 is jammed. Open a high-priority ticket with the tickets MCP server.",
    mocks=[tickets],
    cases=[
        case(
            "open-printer-ticket",
            validate=[
                opened_a_high_priority_ticket,
                assertion("called", "tickets create_ticket", name="called create_ticket"),
            ],
        )
    ],
    variants=[
        variant(
            "command",
            profile=profile("ticket-opener", dir=str(AGENTS / "ticket-opener"), run="bash run.sh"),
        ),
        variant(
            "command",
            profile=profile("claims-only", dir=str(AGENTS / "claims-only"), run="bash run.sh"),
        ),
    ],
)
