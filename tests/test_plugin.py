"""The pytest plugin, tested with pytester: claim files become items; failures say what a theorist needs."""

import pytest

from conftest import NORM_CLAIM

pytest_plugins = ["pytester"]


@pytest.fixture
def project(pytester):
    d = pytester.mkdir("claims") / "toy"
    d.mkdir()
    return d


def test_holding_claim_passes_and_summary_is_printed(pytester, project):
    (project / "norm.toml").write_text(NORM_CLAIM)
    res = pytester.runpytest("claims", "-q")
    res.assert_outcomes(passed=1)
    res.stdout.fnmatch_lines(["*lemmacheck claims*", "*toy/lemma-1/norm*holds*ok*"])


def test_violated_claim_fails_with_bound_estimate_slack_interval_search_and_repro(pytester, project):
    bad = NORM_CLAIM.replace("B = 100.0 }, { m = 64, L = 2, B = 100.0 }", "B = 0.5 }, { m = 64, L = 2, B = 0.5 }")
    (project / "norm.toml").write_text(bad)
    res = pytester.runpytest("claims", "-q")
    res.assert_outcomes(failed=1)
    res.stdout.fnmatch_lines([
        "*toy/lemma-1/norm (toy, Lemma 1): verdict 'violated', expected 'holds'*",
        "*checked: max-layer-output-norm <= B; with probability >= 1 - delta; search: none*",
        "*bound 0.5, estimate max *slack min *",
        "*violations 10/10, violation-rate interval [[]*] vs delta 0.1*",
        # early stop (the default): one shard of 10 all violating settles it; repro replays the draws it used
        "*stopped early: 10 of 100 planned draws decided it (anytime-valid confidence sequence)",
        "*reproduce: lemmacheck repro toy/lemma-1/norm --params*--seed * --replicates 10 --shard-size 10",
    ])


def test_confirmed_finding_passes_until_the_verdict_changes(pytester, project):
    finding = NORM_CLAIM.replace('kind      = "norm-at-init"',
                                 'kind      = "norm-at-init"\nexpect = "violated"\nfinding = "fails at B = 0.5"')
    (project / "a.toml").write_text(finding.replace("B = 100.0 }, { m = 64, L = 2, B = 100.0 }",
                                                    "B = 0.5 }, { m = 64, L = 2, B = 0.5 }"))
    (project / "b.toml").write_text(finding.replace("toy/lemma-1/norm", "toy/lemma-1/norm-b"))
    res = pytester.runpytest("claims", "-q")
    # a: still violated -> passes (strict-xfail-like); b: now holds -> fails, because the finding changed.
    res.assert_outcomes(passed=1, failed=1)
    res.stdout.fnmatch_lines(["*toy/lemma-1/norm-b*verdict 'holds', expected 'violated'*",
                              "*Violated, not triaged*", "*toy/lemma-1/norm*verdict=violated*"])


def test_a_papers_findings_file_is_not_collected_as_a_claim(pytester, project):
    (project / "norm.toml").write_text(NORM_CLAIM)
    (project / "findings.toml").write_text('[[lead]]\nid = "toy/some-lead"\n')
    res = pytester.runpytest("claims", "-q")
    res.assert_outcomes(passed=1)


def test_malformed_claim_is_a_failing_item_naming_file_and_field(pytester, project):
    (project / "good.toml").write_text(NORM_CLAIM)
    (project / "bad.toml").write_text(NORM_CLAIM.replace('id        = "toy/lemma-1/norm"', 'id = "toy/x"')
                                      .replace('"max-layer-output-norm"', '"no-such-quantity"'))
    res = pytester.runpytest("claims", "-q")
    res.assert_outcomes(passed=1, failed=1)
    res.stdout.fnmatch_lines(["*malformed claim file:*bad.toml: field 'check.quantity': unknown quantity*"])


def test_infeasible_claim_is_reported_with_its_reason(pytester, project):
    (project / "i.toml").write_text(NORM_CLAIM.split("[params]")[0] + 'infeasible = "width ~1e50"\n')
    res = pytester.runpytest("claims", "-q", "-rs")
    res.assert_outcomes(skipped=1)
    res.stdout.fnmatch_lines(["*infeasible (recorded in the claim file): width ~1e50*"])


def test_one_paper_can_be_selected(pytester, project):
    (project / "norm.toml").write_text(NORM_CLAIM)
    other = project.parent / "other"
    other.mkdir()
    (other / "n.toml").write_text(NORM_CLAIM.replace("toy/", "other/").replace('"toy"', '"other"'))
    res = pytester.runpytest("claims/toy", "-q")
    res.assert_outcomes(passed=1)
