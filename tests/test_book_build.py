"""The book builds from the committed outputs (``make book``) and every page loads in a real browser."""

import functools
import importlib.util
import re
import shlex
import shutil
import subprocess
import sys
import threading
from html.parser import HTMLParser
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from booktools import edition, notebooks

HTML = notebooks.ROOT / "_build" / "html"
SCREENSHOTS = notebooks.ROOT / "_build" / "screenshots"
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def reads_the_built_book(test):
    """A test of the built book: slow, and the build (``make book``, up to 900 s) counts in the time of the first
    one that runs, so its time limit is longer than the default."""
    return pytest.mark.timeout(1200)(pytest.mark.slow(test))


@pytest.fixture(scope="module")
def built_book(skip_or_fail):
    if importlib.util.find_spec("jupyter_book") is None:
        skip_or_fail("jupyter-book is not installed in this environment (make test installs it in .venv)")
    result = subprocess.run(
        ["make", "--no-print-directory", "book", f"PYTHON={sys.executable}"],
        cwd=notebooks.ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, f"make book failed:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
    return HTML


def built_pages(html_root: Path) -> list[Path]:
    return sorted(p for p in html_root.rglob("*.html") if "_static" not in p.parts and "_sources" not in p.parts)


@reads_the_built_book
def test_make_book_builds_every_chapter(built_book):
    for entry in notebooks.toc_files():
        assert (built_book / f"{entry}.html").is_file(), f"{entry} was not built"


@reads_the_built_book
def test_chapters_and_their_exercises_are_numbered_as_the_prose_says(built_book):
    """The prose says "chapter 4": the sidebar and the title number chapter NN as NN (the root page, chapter 0, and
    the pages for teachers and reviewers are not numbered), and exercises are numbered within their chapter
    (chapter 2's first is Exercise 2.1, a chapter's second page goes on with its chapter's number)."""
    for entry in notebooks.toc_files():
        number = int(Path(entry).name[:2])
        html = (built_book / f"{entry}.html").read_text(encoding="utf-8")
        title = re.search(r"<title>(.*?)</title>", html, re.S).group(1)
        shown = re.match(r"(\d+)\. ", title)
        if entry == notebooks.toc_files()[0] or number >= 90 or entry.endswith("_watching_memory"):
            assert shown is None, f"{entry} is numbered: {title}"
        else:
            assert shown and int(shown.group(1)) == number, f"{entry} is not numbered {number}: {title}"
        exercises = re.findall(r'class="caption-number">Exercise ([\d.]+) <', html)
        expected = [f"{number}.{k}" for k in range(1, len(exercises) + 1)]  # chapter 4's are on its second page
        assert exercises == expected, f"{entry}: exercises numbered {exercises}"


class _ImageSources(HTMLParser):
    def __init__(self):
        super().__init__()
        self.sources = []
        self.images = []  # (src, alt, role or aria-hidden) of every <img>

    def handle_starttag(self, tag, attrs):
        if tag == "img":
            attributes = dict(attrs)
            self.sources.append(attributes.get("src", ""))
            decorative = attributes.get("role") == "presentation" or attributes.get("aria-hidden") == "true"
            self.images.append((attributes.get("src", ""), attributes.get("alt"), decorative))


#: Alt text that is a file's name: what Sphinx writes when a figure was given none (a hashed output name).
_FILE_NAME = re.compile(r"[\w./%-]+\.(png|jpe?g|gif|svg|webp)", re.IGNORECASE)


def alt_text_problem(src: str, alt: str | None, decorative: bool = False) -> str | None:
    """Why a screen reader would announce this image badly, or None: no alt text (only an image marked decorative
    may have an empty one), or alt text that is a file name.

    >>> alt_text_problem("_images/3f2a.png", "_images/3f2a.png")
    "its alt text is a file name: '_images/3f2a.png'"
    >>> alt_text_problem("a.png", None), alt_text_problem("a.png", "", decorative=True)
    ('it has no alt text', None)
    >>> alt_text_problem("a.png", "Bar chart of GPU speed-up by workload")
    """
    text = (alt or "").strip()
    if not text:
        return None if decorative and alt is not None else "it has no alt text"
    if _FILE_NAME.fullmatch(text) or text == Path(unquote(src)).name:
        return f"its alt text is a file name: {text!r}"
    return None


def test_every_image_tells_a_screen_reader_what_it_shows(built_book):
    """Every figure has alt text in words (myst-nb's `mystnb.image.alt` for a plotted output, the Markdown image's
    description for a diagram), not a hashed file name."""
    problems = []
    for page in built_pages(built_book):
        parser = _ImageSources()
        parser.feed(page.read_text(encoding="utf-8"))
        for src, alt, decorative in parser.images:
            if why := alt_text_problem(src, alt, decorative):
                problems.append(f"{page.relative_to(built_book)}: image {src}: {why}")
    assert problems == [], "\n".join(problems)


@reads_the_built_book
def test_every_image_in_the_book_exists(built_book):
    for page in built_pages(built_book):
        parser = _ImageSources()
        parser.feed(page.read_text(encoding="utf-8"))
        for source in parser.sources:
            if source.startswith("data:") or urlparse(source).scheme:
                continue
            assert (page.parent / unquote(source)).is_file(), f"{page.name}: image {source} is missing"


def _redirect_target(page: Path) -> Path | None:
    match = re.search(r'http-equiv="Refresh" content="\d+; url=([^"]+)"', page.read_text(encoding="utf-8"), re.I)
    return (page.parent / match.group(1)).resolve() if match else None


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if path := shutil.which(name):
            return path
    return None


@pytest.fixture(scope="module")
def served_book(built_book):
    """The built book served over HTTP on this machine, as a reader's browser loads it (``file://`` pages may not
    load fonts); yields its base URL."""

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(built_book)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


@reads_the_built_book
def test_every_page_loads_in_headless_chromium(built_book, served_book, skip_or_fail):
    """One pass over every page at a laptop's width: every request and image loads, every image has alt text in
    words (not a file name), every code cell (in the text,
    an exercise or a solution) shows CODE_COLUMNS columns whole, no output block or Markdown code block has
    content wider than its box (a cut line is often the point of the cell), and one search box shows. Then, in the
    same browser, one pass at a phone's width: no page scrolls sideways as a whole, and one search control shows."""
    if importlib.util.find_spec("playwright") is None:
        skip_or_fail("the browser check needs the playwright package (make test installs it in .venv)")
    executable = _chromium()
    if executable is None:
        skip_or_fail("the browser check needs Chromium: apt-get install chromium")
    from playwright.sync_api import sync_playwright

    def url(path: Path) -> str:
        return served_book + path.relative_to(built_book).as_posix()

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    problems = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_FLAGS)
        page = browser.new_page(viewport=LAPTOP)
        failed = []
        page.on("requestfailed", lambda request: failed.append(request.url))
        for path in built_pages(built_book):
            failed.clear()
            page.goto(url(path), wait_until="load")
            name = path.relative_to(built_book)
            if target := _redirect_target(path):  # index.html sends the reader to the first chapter
                page.wait_for_url(url(target), wait_until="load")
                problems += [f"{name}: request failed: {u}" for u in failed]
                continue
            broken = page.eval_on_selector_all(
                "img", "images => images.filter(i => !i.complete || i.naturalWidth === 0).map(i => i.src)"
            )
            problems += [f"{name}: request failed: {u}" for u in failed]
            problems += [f"{name}: image did not load: {src}" for src in broken]
            shown = page.eval_on_selector_all("img", _IMAGE_ALT_TEXTS)
            problems += [
                f"{name}: image {src}: {why}"
                for src, alt, decorative in shown
                if (why := alt_text_problem(src, alt, decorative))
            ]
            columns = page.eval_on_selector_all("div.cell_input pre", _COLUMNS_SHOWN)
            if columns and min(columns) < CODE_COLUMNS:
                problems.append(f"{name}: a code cell shows {min(columns):.1f} columns, less than {CODE_COLUMNS}")
            searches = page.eval_on_selector_all(_SEARCH_CONTROLS, _SHOWN)
            if searches != 1 and path.name != "search.html":  # the search page has its own form besides
                problems.append(f"{name}: {searches} search boxes show at {LAPTOP['width']} px, not one")
            cut = page.eval_on_selector_all("div.cell_output pre, div.highlight pre", _WIDER_THAN_THEIR_BOX)
            problems += [f"{name}: an output or code block is cut at {LAPTOP['width']} px: {line!r}" for line in cut]
        page.set_viewport_size(PHONE)
        for path in built_pages(built_book):
            if _redirect_target(path):
                continue
            page.goto(url(path), wait_until="load")
            searches = page.eval_on_selector_all(_SEARCH_CONTROLS, _SHOWN)
            if searches != 1 and path.name != "search.html":
                problems.append(f"{path.relative_to(built_book)}: {searches} search controls at {PHONE['width']} px")
            if wider := page.evaluate(_PAGE_WIDER_THAN_WINDOW):
                problems.append(f"{path.relative_to(built_book)}: scrolls sideways at {PHONE['width']} px: {wider}")
        page.set_viewport_size(LAPTOP)
        first_chapter = built_book / f"{notebooks.toc_files()[0]}.html"
        page.goto(url(first_chapter), wait_until="load")
        assert page.locator("article h1").first.is_visible(), "the first chapter shows no title"
        page.screenshot(path=str(SCREENSHOTS / f"{first_chapter.stem}.png"), full_page=False)
        browser.close()
    assert problems == []


def test_the_claims_page_reads_at_a_laptops_and_a_phones_width_and_links_each_claim_to_its_section(
    built_book, served_book, skip_or_fail
):
    """The page *Claims and evidence* at 1440 px and at 390 px: nothing in it is wider than the window or scrolls
    sideways inside a box (a claim is a small block, not a wide table), and each claim's link leads to an element
    with that id on its chapter's page."""
    if importlib.util.find_spec("playwright") is None:
        skip_or_fail("the browser check needs the playwright package (make test installs it in .venv)")
    executable = _chromium()
    if executable is None:
        skip_or_fail("the browser check needs Chromium: apt-get install chromium")
    from playwright.sync_api import sync_playwright

    claims_page = built_book / "chapters" / "91_claims_and_evidence.html"
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    address = served_book + claims_page.relative_to(built_book).as_posix()
    problems = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_FLAGS)
        page = browser.new_page(viewport=LAPTOP)
        for window in (LAPTOP, PHONE):
            page.set_viewport_size(window)
            page.goto(address, wait_until="load")
            if wider := page.evaluate(_PAGE_WIDER_THAN_WINDOW):
                problems.append(f"scrolls sideways at {window['width']} px: {wider}")
            boxes = page.eval_on_selector_all("article table, article ul, article p", _SCROLLS_INSIDE)
            problems += [f"a box scrolls sideways at {window['width']} px: {text!r}" for text in boxes]
            page.screenshot(path=str(SCREENSHOTS / f"claims_{window['width']}.png"), full_page=False)
        links = page.eval_on_selector_all(
            "article li a.reference.internal", "links => links.map(a => a.getAttribute('href'))"
        )
        sections = [href for href in links if "#" in href and not href.startswith("#")]
        assert sections, "no claim links to a section of its chapter"
        for href in sorted(set(sections)):
            target, anchor = href.split("#", 1)
            html = (claims_page.parent / target).read_text(encoding="utf-8")
            if f'id="{anchor}"' not in html:
                problems.append(f"the link {href} leads to no element with that id")
        browser.close()
    assert problems == []


#: The start of each element whose content is wider than the element (it scrolls or is cut sideways).
_SCROLLS_INSIDE = """elements => elements
  .filter(e => e.scrollWidth > e.clientWidth + 1)
  .map(e => e.textContent.trim().slice(0, 60))"""


CODE_COLUMNS = notebooks.CODE_COLUMNS
#: A common laptop's browser window: a code line of CODE_COLUMNS must show whole in it.
LAPTOP = {"width": 1440, "height": 900}
#: A phone's browser window: the page may not scroll sideways as a whole (code and output scroll in their boxes).
PHONE = {"width": 390, "height": 844}

#: The longest line (its start) of each output block and Markdown code block whose content is wider than its
#: box; code cells are measured by _COLUMNS_SHOWN instead.
_WIDER_THAN_THEIR_BOX = """blocks => blocks
  .filter(block => !block.closest('div.cell_input') && block.scrollWidth > block.clientWidth + 1)
  .map(block => block.textContent.split('\\n').reduce((a, b) => (b.length > a.length ? b : a), '').slice(0, 80))"""

#: [src, alt (null when absent), decorative] of every image as the browser has it, scripts' images included.
_IMAGE_ALT_TEXTS = """images => images.map(i => [i.getAttribute('src') || '', i.getAttribute('alt'),
  i.getAttribute('role') === 'presentation' || i.getAttribute('aria-hidden') === 'true'])"""

#: The theme's search field (in the sidebar) and search button (in the header bar): one of them shows at a time.
_SEARCH_CONTROLS = ".search-button-field, .search-button, input[type=search]"
_SHOWN = "elements => elements.filter(e => e.offsetParent !== null && e.getBoundingClientRect().width > 0).length"

#: null when the page is no wider than the window; else its width and the first element that sticks out past
#: the window's edge outside a box that scrolls on its own (a code cell, a table's container).
_PAGE_WIDER_THAN_WINDOW = """() => {
  const width = window.innerWidth;
  if (document.documentElement.scrollWidth <= width) return null;
  const scrolls = element => {
    for (let e = element.parentElement; e; e = e.parentElement) {
      if (['auto', 'scroll', 'hidden'].includes(getComputedStyle(e).overflowX)) return true;
    }
    return false;
  };
  const culprit = [...document.querySelectorAll('article *')].find(
    e => e.getBoundingClientRect().right > width + 1 && !scrolls(e));
  const what = culprit ? `${culprit.tagName.toLowerCase()} ${JSON.stringify(culprit.textContent.slice(0, 60))}` : '';
  return `${document.documentElement.scrollWidth} px wide ${what}`;
}"""


_COLUMNS_SHOWN = """blocks => blocks.map(block => {
  const probe = document.createElement('span');
  probe.textContent = 'x'.repeat(100);
  block.appendChild(probe);
  const column = probe.getBoundingClientRect().width / 100;
  probe.remove();
  const style = getComputedStyle(block);
  return (block.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight)) / column;
})"""


def test_the_lint_holds_notebook_code_to_the_width_the_page_shows():
    planned = subprocess.run(
        ["make", "--no-print-directory", "-n", "-s", "lint", "PYTHON=python"],
        cwd=notebooks.ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    on_chapters = [shlex.split(line) for line in planned if line.split()[-1:] == ["chapters"]]
    widths = {words[words.index("--line-length") + 1] for words in on_chapters if "--line-length" in words}
    assert widths == {str(CODE_COLUMNS)}, planned  # the code check and the format check of the chapters


def test_every_page_names_the_edition_pyproject_gives(built_book):
    """The header (the sidebar's title and each page's <title>) shows pyproject.toml's version (booktools.edition)."""
    titled = edition.titled("", edition.version()).strip()
    for entry in notebooks.toc_files():
        html = (built_book / f"{entry}.html").read_text(encoding="utf-8")
        title = re.search(r"<title>(.*?)</title>", html, re.S).group(1)
        assert title.endswith(f" {titled}"), f"{entry}: the title {title!r} does not name edition {titled}"
