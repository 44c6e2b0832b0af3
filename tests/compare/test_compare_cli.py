"""The CLI and CI side, through the real `proctor eval` and `proctor compare` on small eval files
with a command agent: a broken agent shows up as a significant regression at the top, with its
interval and the headline; `--fail-on-regression` exits 1 then 0; `--junit` writes a report the
JUnit schema accepts; `--json` carries trial ids, session ids, dashboard links and costs."""

from __future__ import annotations

import json
import math
import shutil
import textwrap
from pathlib import Path

import pytest
import xmlschema
from conftest import proctor_env, run_proctor

HERE = Path(__file__).resolve().parent
SCHEMA = xmlschema.XMLSchema(HERE / "junit.xsd")

EVAL = """
from pathlib import Path

from proctor import Verdict, case, profile, suite, variant

AGENT = Path(__file__).parent / "agent"
bot = variant(
    "command",
    name="bot",
    model="scripted/bot",
    profile=profile("bot", dir=str(AGENT), run='python3 "$PROCTOR_PROFILE_DIR/steady_bot.py"'),
)


def says_ok(ctx) -> Verdict:
    return Verdict(ctx.answer() == "ok", f"the agent said {ctx.answer()!r}")


toy = suite(
    "toy",
    prompt="Do the task {{task}}",
    cases=[
        case("fragile", variables={"task": "fragile"}, validate=says_ok),
        case("steady", variables={"task": "steady"}, validate=says_ok),
    ],
    variants=[bot],
    trials=3,
)
"""


class Project:
    """A folder with the eval file and its agent, and a Proctor home of its own."""

    def __init__(self, root: Path) -> None:
        self.folder = root / "project"
        (self.folder / "agent").mkdir(parents=True)
        shutil.copy(HERE / "agents" / "steady_bot.py", self.folder / "agent" / "steady_bot.py")
        (self.folder / "toy.eval.py").write_text(textwrap.dedent(EVAL).lstrip())
        self.env = proctor_env(root / "home", PROCTOR_DASHBOARD_URL="http://proctor.test:8000")

    def proctor(self, *args: str):
        return run_proctor(*args, cwd=self.folder, env=self.env, timeout=240)

    def break_agent(self, *tasks: str) -> None:
        (self.folder / "agent" / "broken").write_text("\n".join(tasks) + "\n")


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Project:
    """Batch 1 (label "good", the suite's baseline) and batch 2 (label "broken": the agent
    fails the fragile case), each with a JUnit report."""
    project = Project(tmp_path_factory.mktemp("compare-cli"))
    good = project.proctor("eval", "--label", "good", "--junit", "reports/good.xml", "--json")
    assert good.returncode == 0, good.stderr
    project.good = json.loads(good.stdout)
    marked = project.proctor("compare", "--mark-baseline", "1")
    assert marked.returncode == 0, marked.stderr
    assert "Batch 1 is now the baseline of toy." in marked.stderr
    project.break_agent("fragile")
    broken = project.proctor(
        "eval",
        "--label",
        "broken",
        "--baseline",
        "suite-baseline",
        "--fail-on-regression",
        "--junit",
        "reports/broken.xml",
    )
    project.broken = broken
    return project


def test_a_significant_regression_against_the_baseline_exits_1(project):
    assert project.broken.returncode == 1, project.broken.stderr
    assert "significant regression against the baseline" in project.broken.stderr
    # The run's own table, then the changed cells of the comparison.
    assert "B passes 1 fewer case than A; 1 regression, 1 significant" in project.broken.stdout


def test_no_regression_against_the_baseline_exits_0(project):
    again = project.proctor("eval", "--label", "again", "--baseline", "2", "--fail-on-regression")
    assert again.returncode == 0, again.stderr + again.stdout
    assert "B passes as many cases as A; 0 regressions, 0 significant" in again.stdout


def test_compare_prints_the_regression_first_with_its_interval_and_the_headline(project):
    result = project.proctor("compare", "1", "2")

    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("A = batch 1 (good)  →  B = batch 2 (broken)")
    assert lines[1] == "B passes 1 fewer case than A; 1 regression, 1 significant"
    assert any("agent digest (profile) differs: bot ran" in line for line in lines)
    rows = [line for line in lines if "× bot" in line]
    assert "toy/fragile × bot" in rows[0] and "toy/steady × bot" in rows[1]
    assert "3/3 100% [44%–100%]" in rows[0] and "0/3 0% [0%–56%]" in rows[0]
    assert "-100% [-100%, -21%]" in rows[0] and "regression significant" in rows[0]
    assert "http://proctor.test:8000/compare/?a=1&b=2" in result.stdout


def test_compare_json_matches_the_table(project):
    result = project.proctor("compare", "1", "2", "--json")

    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    first = data["cells"][0]
    assert (first["case"], first["change"], first["significant"]) == ("fragile", "regression", True)
    # Newcombe's upper bound for 3/3 -> 0/3: -1 + sqrt(2) x (Wilson upper of 0/3 = z²/(3 + z²)).
    z2 = 1.959964**2
    assert first["delta_interval"] == [-1.0, round(-1 + math.sqrt(2) * z2 / (3 + z2), 4)]
    assert data["headline"] == "B passes 1 fewer case than A; 1 regression, 1 significant"
    assert [w["kind"] for w in data["warnings"]] == ["agent_digest"]
    assert data["variants"][0]["only_a"] == ["toy/fragile"]
    assert data["b"]["cost"]["total_usd"] == pytest.approx(0.06)
    assert data["b"]["cost"]["per_passed_trial_usd"] == pytest.approx(0.02)


def test_compare_with_the_suite_baseline_and_fail_on_regression(project):
    result = project.proctor("compare", "suite-baseline", "2", "--fail-on-regression", "--json")
    assert result.returncode == 1
    (comparison,) = json.loads(result.stdout)["comparisons"]
    assert comparison["a"]["id"] == 1 and comparison["a"]["is_baseline"]


def test_bad_batch_ids_are_one_sentence(project):
    missing = project.proctor("compare", "1", "99")
    assert missing.returncode == 2
    assert missing.stderr.strip() == "B: there is no batch 99 in organization default"
    word = project.proctor("compare", "first", "2")
    assert word.stderr.strip() == "A: 'first' is not a batch id (a number)"
    both = project.proctor("compare", "98", "99")
    assert both.returncode == 2
    assert both.stderr.splitlines() == [
        "A: there is no batch 98 in organization default",
        "B: there is no batch 99 in organization default",
    ]
    no_baseline = project.proctor("eval", "--baseline", "99")
    assert no_baseline.returncode == 2
    assert (
        no_baseline.stderr.strip() == "--baseline 99: there is no batch 99 in organization default"
    )
    alone = project.proctor("eval", "--fail-on-regression")
    assert alone.stderr.strip() == "--fail-on-regression needs --baseline BATCH or suite-baseline"


def test_the_junit_reports_are_valid_and_name_the_failure(project):
    good = project.folder / "reports" / "good.xml"
    broken = project.folder / "reports" / "broken.xml"

    SCHEMA.validate(good)
    SCHEMA.validate(broken)
    tree = SCHEMA.to_dict(broken)
    (suite,) = tree["testsuite"]
    assert (suite["@name"], suite["@tests"], suite["@failures"], suite["@errors"]) == (
        "toy",
        2,
        1,
        0,
    )
    cases = {case["@classname"]: case for case in suite["testcase"]}
    failure = cases["toy.fragile"]["failure"]
    assert failure["@message"] == "0/3 trials passed (case version 1)"
    assert "says_ok failed: the agent said 'no'" in failure["$"]
    assert "http://proctor.test:8000/trials/" in failure["$"]
    assert "failure" not in cases["toy.steady"]
    properties = {p["@name"]: p["@value"] for p in suite["properties"]["property"]}
    assert properties["proctor.label"] == "broken"


def test_json_carries_trial_ids_sessions_links_and_costs(project):
    run = project.good["runs"][0]
    trial = run["trials"][0]

    assert project.good["label"] == "good"
    assert project.good["url"] == "http://proctor.test:8000/batches/1/"
    assert isinstance(trial["id"], int)
    assert trial["url"] == f"http://proctor.test:8000/trials/{trial['id']}/"
    assert trial["session_id"].startswith("bot-")
    assert run["url"] == f"http://proctor.test:8000/runs/{run['run_id']}/"
    assert trial["cost_usd"] == pytest.approx(0.01)
    assert project.good["cost_usd"] == pytest.approx(0.06)
