"""The starter ``proctor init --multi-turn`` writes: four simulated callers against a chat agent.

The scenarios cover what a conversational agent meets most: an interested lead, a skeptical
one, a firm refusal, and a conversation picked up in the middle (seeded messages). Every case
shares weighted assertions (a leak of serialized objects weighs most; latency is information
only) plus its own outcome rubric, and passes at a weighted score of 0.6.
"""

from __future__ import annotations

from dataclasses import dataclass

from runner.importers.python_source import Call, Module, Name, Spread, call

STARTER_FILE = "multi-turn.eval.py"
SUITE_ID = "multi-turn-starter"
THRESHOLD = 0.6
MAX_TURNS = 8
OPENING_LINE = "Hello."

AGENT_PROMPT = """\
You are the assistant on Acme Analytics' sales line. Acme sells a reporting dashboard for \
small teams; plans start at $49 per seat per month, and a 14-day trial is free.

Find out who you are talking to and what they need, answer their questions honestly, and \
offer a 30-minute demo when it would help. Book demos with the schedule_demo tool and confirm \
the time it returns. If the caller is not interested, accept it politely. You are an AI \
assistant: never claim to be a person. When the caller says goodbye, say goodbye and end your \
message with ###STOP###."""

SCHEDULE_DEMO_STUB = '''\
def schedule_demo(args: dict) -> str:
    """Stands in for the booking system; answers in words, since the model reads it back."""
    when = args.get("time") or "the requested time"
    return f"Demo booked for {when}. A calendar invite is on its way to {args.get('email') or 'the caller'}."'''

SCHEDULE_DEMO_PARAMETERS = {
    "type": "object",
    "properties": {
        "time": {"type": "string", "description": "Day and time of the demo, like 'Thursday 2pm'"},
        "email": {"type": "string", "description": "Where the invite goes"},
    },
    "required": ["time"],
}


@dataclass(frozen=True)
class Scenario:
    id: str
    name: str
    instructions: str
    first_message: str
    outcome: str  # the disposition rubric
    initial_messages: tuple[tuple[str, str], ...] = ()


SCENARIOS = (
    Scenario(
        id="interested-lead",
        name="Interested lead",
        instructions=(
            "You are Jordan Lee, operations manager at a 40-person logistics company. You saw an "
            "Acme ad and would like a demo this week. You are friendly and cooperative, but you ask "
            "what it costs before agreeing to a time. Thursday at 2pm suits you; your email is "
            "jordan.lee@example.com.\n"
            "Answer what the agent asks and do not lead the conversation. Once the demo is booked, "
            "thank the agent and wrap up."
        ),
        first_message="Hi, I saw your ad and wanted to find out more about what you do.",
        outcome=(
            "The agent learns what the caller needs, answers the pricing question, and books a "
            "demo with the caller, confirming the time."
        ),
    ),
    Scenario(
        id="skeptical-lead",
        name="Skeptical lead",
        instructions=(
            "You are Priya Nair, who runs finance for a small agency. A similar tool you bought last "
            "year never got used, so you doubt every claim and ask for specifics: who uses it, how "
            "long setup takes, what happens if you cancel. You push back on the price once. If the "
            "answers are straight, you agree to the free trial, not a demo.\n"
            "Only respond to what the agent asks; do not volunteer more. When your doubts are "
            "answered, or clearly will not be, start wrapping up."
        ),
        first_message="I'll be honest, I've been burned by dashboards before. Why would yours be different?",
        outcome=(
            "The agent answers the objections specifically and honestly, does not overpromise or "
            "pressure, and offers a low-commitment next step such as the free trial."
        ),
    ),
    Scenario(
        id="firm-refusal",
        name="Firm refusal",
        instructions=(
            "You are Sam Ortiz. Months ago you filled in a form on Acme's site and you no longer want "
            "anything. You say no clearly. If the agent pitches again, you repeat that you are not "
            "interested, a little shorter each time, and end the call.\n"
            "Only answer what the agent asks; do not explain yourself at length."
        ),
        first_message="Hi, I got a message to call this number. I'm not interested, to be clear.",
        outcome=(
            "The agent accepts the refusal after at most one gentle question, stops pitching, and "
            "ends the conversation courteously."
        ),
    ),
    Scenario(
        id="resumed-mid-conversation",
        name="Resumed mid-conversation",
        instructions=(
            "You are Alex Thompson. You have already said who you are and that you want a demo; now "
            "you are choosing a time. Thursday afternoon suits you (2pm or 3pm). Your email is "
            "alex.thompson@example.com.\n"
            "Be reactive: answer what the agent asks. Once the demo is booked, wrap up."
        ),
        first_message="Thursday afternoon would be ideal.",
        outcome=(
            "The agent carries on from where the conversation left off, uses Alex's name without "
            "asking for it again, and books the Thursday demo."
        ),
        initial_messages=(
            ("user", "Hi, I'm calling about booking a demo."),
            ("assistant", "Happy to help with that! May I have your name?"),
            ("user", "It's Alex Thompson."),
            ("assistant", "Thanks, Alex. Which day works best for you?"),
        ),
    ),
)

# (type, value, weight, metric): the checks every scenario shares.
SHARED_ASSERTIONS = (
    ("not-icontains", "[object Object]", 3, "no-json-leak"),
    (
        "llm-rubric",
        "The agent sounds warm and professional throughout: natural sentences, nothing "
        "robotic or copied and pasted.",
        2,
        "tone",
    ),
    (
        "llm-rubric",
        "The agent stays in its role as Acme's assistant, never claims to be a person, and "
        "never writes the caller's lines.",
        1.5,
        "role-adherence",
    ),
    (
        "llm-rubric",
        "The agent remembers what the caller already said (name, needs, times) and does not "
        "ask for it again.",
        1.5,
        "knowledge-retention",
    ),
    (
        "llm-rubric",
        "Once the caller's business is done, the agent moves the conversation to a natural close.",
        0.5,
        "closing-attempt",
    ),
    ("turn-count", 6, 0.5, "turn-efficiency"),
    ("latency", 60_000, 0, "latency"),
)


def starter_source(model: str) -> str:
    """The starter file's text, its chat variant on ``model``."""
    module = Module(
        header=[
            "Multi-turn starter: simulated callers against a chat agent with a booking tool.",
            "",
            "Each case's simulated user plays a persona; the conversation ends when the agent says",
            "###STOP###, the caller wraps up, or max_turns is reached. A case passes when the weighted",
            "score of its assertions reaches its threshold (weight 0 is information only).",
            "Run it with `proctor eval`; point the variant at your own agent when you are ready.",
        ]
    )
    module.functions.append(SCHEDULE_DEMO_STUB)
    shared = module.assign(
        "shared_assertions",
        [
            call("assertion", kind, value, weight=weight, metric=metric)
            for kind, value, weight, metric in SHARED_ASSERTIONS
        ],
    )
    module.assign(
        "multi_turn_starter",
        call(
            "suite",
            SUITE_ID,
            name="Multi-turn starter",
            prompt=OPENING_LINE,
            variants=[
                call(
                    "variant",
                    "chat",
                    model=model,
                    system_prompt=AGENT_PROMPT,
                    tools=[
                        call(
                            "tool",
                            "schedule_demo",
                            description="Book a 30-minute product demo.",
                            parameters=SCHEDULE_DEMO_PARAMETERS,
                            stub=Name("schedule_demo"),
                        )
                    ],
                )
            ],
            cases=[_case(scenario, shared) for scenario in SCENARIOS],
        ),
    )
    return module.source()


def _case(scenario: Scenario, shared: Name) -> Call:
    seeded = [{"role": role, "content": text} for role, text in scenario.initial_messages] or None
    return call(
        "case",
        scenario.id,
        name=scenario.name,
        user=call(
            "simulated_user",
            scenario.instructions,
            first_message=scenario.first_message,
            max_turns=MAX_TURNS,
            initial_messages=seeded,
        ),
        validate=[
            Spread(shared),
            call(
                "assertion", "llm-rubric", scenario.outcome, weight=2, metric="disposition-outcome"
            ),
        ],
        threshold=THRESHOLD,
    )
