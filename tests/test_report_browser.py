"""The report in a real browser: headless Chromium opens the pages from file://, renders MathML and SVG,
sorts a table on a click, and requests nothing from the network.

Needs the Debian packages `chromium` and `chromium-driver` (and selenium). Without them the test is skipped,
or fails with the reason when LEMMACHECK_REQUIRE_BROWSER=1 (CI sets it, so CI cannot skip silently).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest
from test_report import make_site

pytestmark = pytest.mark.browser

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


def _unavailable(reason: str) -> None:
    msg = (f"browser test cannot run: {reason}. Install with `apt-get install -y chromium chromium-driver` "
           "(and `pip install selenium`).")
    if os.environ.get("LEMMACHECK_REQUIRE_BROWSER") == "1":
        pytest.fail(msg + " LEMMACHECK_REQUIRE_BROWSER=1 is set, so this is an error, not a skip.")
    pytest.skip(msg)


@pytest.fixture(scope="module")
def driver(tmp_path_factory):
    for path in (CHROMIUM, CHROMEDRIVER):
        if not (Path(path).is_file() and os.access(path, os.X_OK)) and shutil.which(Path(path).name) is None:
            _unavailable(f"{path} not found")
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError as exc:
        _unavailable(f"selenium is not importable ({exc})")
    binary = CHROMIUM if Path(CHROMIUM).is_file() else shutil.which("chromium")
    drv_path = CHROMEDRIVER if Path(CHROMEDRIVER).is_file() else shutil.which("chromedriver")
    opts = webdriver.ChromeOptions()
    opts.binary_location = str(binary)
    for arg in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                "--disable-component-update", "--no-first-run", "--disable-default-apps", "--disable-sync",
                "--window-size=1400,1000", f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}"):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"performance": "ALL"})
    try:
        drv = webdriver.Chrome(service=Service(str(drv_path)), options=opts)
    except Exception as exc:  # noqa: BLE001  (selenium raises several types when the browser cannot start)
        _unavailable(f"Chromium did not start ({type(exc).__name__}: {exc})")
    drv.set_page_load_timeout(60)
    # Let the browser's own start-up traffic (new-tab page, chrome:// resources) finish, then drop it.
    drv.get("about:blank")
    quiet = 0
    for _ in range(50):
        quiet = quiet + 1 if not _requests(drv) else 0
        if quiet >= 3:
            break
        time.sleep(0.1)
    yield drv
    drv.quit()


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    return make_site(tmp_path_factory.mktemp("browser-report"))


def _requests(drv) -> list[str]:
    """URLs of every request the pages made since the last call (Chrome DevTools performance log)."""
    urls = []
    for entry in drv.get_log("performance"):
        msg = json.loads(entry["message"])["message"]
        if msg.get("method") == "Network.requestWillBeSent":
            urls.append(msg["params"]["request"]["url"])
    return urls


def _full_screenshot(drv, path: Path) -> None:
    height = drv.execute_script("return document.documentElement.scrollHeight")
    drv.set_window_size(1400, min(int(height) + 120, 8000))
    drv.execute_script("window.scrollTo(0, 0)")
    drv.save_screenshot(str(path))
    drv.set_window_size(1400, 1000)


def test_pages_render_offline_in_chromium(driver, site, tmp_path):
    from selenium.webdriver.common.by import By

    _requests(driver)  # drop whatever the browser did at start-up
    index_url = site["index"].resolve().as_uri()
    driver.get(index_url)
    assert "lemmacheck" in driver.title

    # The confirmed finding's $...$ renders as MathML with a real size.
    maths = driver.find_elements(By.CSS_SELECTOR, "section.findings math")
    assert maths and all(m.size["width"] > 0 and m.size["height"] > 0 for m in maths)

    # Sorting: click "worst slack" in the toy table, read the order, click again for the reverse.
    table = driver.find_element(By.CSS_SELECTOR, "#paper-toy table.claims")
    header = next(th for th in table.find_elements(By.CSS_SELECTOR, "thead th") if th.text.startswith("worst slack"))
    col = [th.text for th in table.find_elements(By.CSS_SELECTOR, "thead th")].index(header.text)

    def column() -> list[str]:
        return [r.find_elements(By.TAG_NAME, "td")[col].get_attribute("data-v")
                for r in table.find_elements(By.CSS_SELECTOR, "tbody tr")]

    def labels() -> list[str]:
        return [r.find_element(By.CSS_SELECTOR, "td.label").text for r in table.find_elements(By.CSS_SELECTOR, "tbody tr")]

    assert labels() == ["Theorem 3", "Lemma A.2", "Lemma A.10", "Lemma B.3"]  # paper order by default
    header.click()
    assert header.get_attribute("aria-sort") == "ascending"
    vals = [float(v) for v in column() if v]
    assert vals == sorted(vals) and len(vals) == 3
    assert column()[-1] == ""  # the infeasible claim has no slack: last in either direction
    header.click()
    assert header.get_attribute("aria-sort") == "descending"
    vals_desc = [float(v) for v in column() if v]
    assert vals_desc == sorted(vals_desc, reverse=True) and column()[-1] == ""

    # Filtering without a server: the text box and the verdict select.
    box = driver.find_element(By.ID, "filter-text")
    box.send_keys("telescoping")
    visible = [r for r in driver.find_elements(By.CSS_SELECTOR, "table.claims tbody tr") if r.is_displayed()]
    assert len(visible) == 2
    assert not driver.find_element(By.ID, "paper-zou2018").is_displayed()
    box.clear()
    box.send_keys(" ")  # fires input; whitespace matches everything
    assert len([r for r in driver.find_elements(By.CSS_SELECTOR, "table.claims tbody tr") if r.is_displayed()]) == 5
    driver.execute_script("var s=document.getElementById('filter-verdict'); s.value='infeasible';"
                          "s.dispatchEvent(new Event('change'));")
    visible = [r for r in driver.find_elements(By.CSS_SELECTOR, "table.claims tbody tr") if r.is_displayed()]
    assert [r.get_attribute("data-verdict") for r in visible] == ["infeasible"]
    driver.execute_script("var s=document.getElementById('filter-verdict'); s.value='';"
                          "s.dispatchEvent(new Event('change')); var q=document.getElementById('filter-text');"
                          "q.value=''; q.dispatchEvent(new Event('input'));")
    _full_screenshot(driver, tmp_path / "index.png")

    # A claim page: statement and bound as MathML, two SVG plots, all with a real size.
    link = driver.find_element(By.LINK_TEXT, "Theorem 5.1 (i)")
    link.click()
    assert driver.current_url.startswith("file://") and "/claims/" in driver.current_url
    statement = driver.find_elements(By.CSS_SELECTOR, ".statement math")
    assert statement and all(m.size["width"] > 0 and m.size["height"] > 0 for m in statement)
    bound = driver.find_elements(By.CSS_SELECTOR, ".formula math mfrac")
    assert bound and bound[0].size["height"] > 0
    plots = driver.find_elements(By.CSS_SELECTOR, "svg.plot")
    assert len(plots) == 2 and all(p.size["width"] > 200 and p.size["height"] > 100 for p in plots)
    assert driver.find_elements(By.CSS_SELECTOR, "svg.plot circle")
    # Escaped user text shows up as text, and no script from it ran.
    assert "<script>alert(1)</script>" in driver.find_element(By.TAG_NAME, "h1").text
    assert driver.execute_script("return document.scripts.length") == 1
    _full_screenshot(driver, tmp_path / "claim.png")
    assert (tmp_path / "index.png").stat().st_size > 10_000 and (tmp_path / "claim.png").stat().st_size > 10_000

    # Nothing left the machine: every request was for the local files (or inline data).
    urls = _requests(driver)
    assert urls, "performance log recorded no requests at all: the network check would be vacuous"
    bad = [u for u in urls if not (u.startswith(("file://", "data:")))]
    assert not bad, f"pages requested network resources: {bad}"


def test_radicals_clear_their_argument_and_nested_regime_fractions_keep_their_size(driver, site, tmp_path):
    """Measured in Chromium's MathML layout with the report's own stylesheet: the radical's bar sits above its
    argument's ink (it merged with it before), and a fraction nested in a regime keeps the outer size."""
    from lemmacheck.report.assets import CSS
    from lemmacheck.report.mathml import latex_to_mathml

    sqrt = latex_to_mathml(r"\sqrt{m \log m} + \sqrt{\frac{L}{\delta}}", split=False)
    page = tmp_path / "math.html"
    page.write_text(f'<!doctype html><html><head><meta charset="utf-8"><style>{CSS}</style></head><body>'
                    f'<div class="statement" id="s">{sqrt}</div></body></html>', encoding="utf-8")
    driver.get(page.resolve().as_uri())
    gaps = driver.execute_script(
        "return [...document.querySelectorAll('#s msqrt')].map(r => {"
        "  const tops = [...r.querySelectorAll('mi,mn,mo')].map(e => e.getBoundingClientRect().top);"
        "  return Math.min(...tops) - r.getBoundingClientRect().top; });")
    # px from the radical's top (its bar) to the highest token of its argument: 2.8 without the report's rule,
    # where the bar touched "m log m" at normal zoom; 5.4 with it
    assert len(gaps) == 2 and all(g >= 4.0 for g in gaps), gaps

    link = site["index"].resolve().as_uri()
    driver.get(link)
    from selenium.webdriver.common.by import By

    driver.find_element(By.LINK_TEXT, "Theorem 5.1 (i)").click()
    sizes = driver.execute_script(
        "const inner = document.querySelector('.requires mfrac mfrac');"
        "const m = inner.closest('math');"
        "return [parseFloat(getComputedStyle(m).fontSize), parseFloat(getComputedStyle(inner.firstElementChild).fontSize)];")
    assert sizes[1] >= 0.95 * sizes[0], sizes  # the nested fraction's numerator is not shrunk to a script size
    tail = driver.find_elements(By.CSS_SELECTOR, "svg.plot .tail-q")
    assert len(tail) == 3 and all(t.size["width"] > 5 for t in tail)  # the 1 - delta quantile marks are drawn


def test_graph_page_renders_and_highlights_a_findings_reach(driver, site, tmp_path):
    """The toy paper's proof graph in Chromium: one drawn node per result (plus one other item), each with a real
    box; choosing the finding marks its own result and the four results resting on it, and the edges among them."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    _requests(driver)
    driver.get(site["index"].resolve().as_uri())
    driver.find_element(By.CSS_SELECTOR, "#paper-toy a.graph-link").click()
    assert driver.current_url.startswith("file://") and driver.current_url.endswith("/graphs/toy.html")
    results = driver.find_elements(By.CSS_SELECTOR, "svg.graph g.node[data-kind=result]")
    assert len(results) == 6 and len(driver.find_elements(By.CSS_SELECTOR, "svg.graph g.node")) == 7
    assert all(g.size["width"] > 40 and g.size["height"] > 20 for g in results)
    assert driver.execute_script("return document.scripts.length") == 1
    # every label fits its box (the text's rendered width is within its rect's)
    fits = driver.execute_script(
        "return [...document.querySelectorAll('svg.graph g.node')].map(g => "
        "g.querySelector('text').getBBox().width <= g.querySelector('rect').getBBox().width)")
    assert all(fits), fits

    def marked(cls: str) -> set[str]:
        return {g.get_attribute("data-label") for g in driver.find_elements(By.CSS_SELECTOR, f"svg.graph g.node.{cls}")}

    assert marked("inreach") == set() and marked("own") == set()
    Select(driver.find_element(By.ID, "graph-finding")).select_by_index(1)
    assert marked("own") == {"Lemma A.10"}
    assert marked("inreach") == {"Lemma B.3", "Lemma B.4", "Theorem 3", "Corollary 5 <script>alert(1)</script>"}
    assert len(driver.find_elements(By.CSS_SELECTOR, "svg.graph path.edge.inreach")) == 4
    assert driver.find_element(By.ID, "graph-count").text == "4 result(s) rest on it"
    assert "active" in driver.find_element(By.ID, "finding-0").get_attribute("class")
    dim = driver.execute_script("return getComputedStyle(document.querySelector("
                                "'svg.graph g.node[data-label=\"Lemma A.2\"]')).opacity")
    assert float(dim) < 0.5  # outside the reach: dimmed
    _full_screenshot(driver, tmp_path / "graph.png")
    assert (tmp_path / "graph.png").stat().st_size > 10_000
    Select(driver.find_element(By.ID, "graph-finding")).select_by_index(0)
    assert marked("inreach") == set()
    bad = [u for u in _requests(driver) if not u.startswith(("file://", "data:"))]
    assert not bad, f"the graph page requested network resources: {bad}"
