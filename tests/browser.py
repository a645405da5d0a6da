"""A report page in a real browser (Debian's chromium, headless): its DOM after the load event,
with whether each image loaded, and a screenshot. Used by tests/integration/test_report_browser.py
and, to refresh the screenshots under docs/img/, on the command line:

    python tests/browser.py OUT_DIR REPORT.html ...      # writes OUT_DIR/report_<name>.png
    python tests/browser.py OUT_DIR --section Risk --height 560 REPORT.html ...
                                       # only the report's Risk section: report_risk_<name>.png
"""
import html.parser
import json
import os
import pathlib
import shutil
import subprocess
import sys

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# run after the load event (every image has loaded or failed by then): records, per <img>,
# whether it decoded to a picture, as an attribute of <body> that --dump-dom prints
PROBE = ("<script>addEventListener('load', () => document.body.setAttribute('data-images',"
         " JSON.stringify([...document.images].map(i => i.complete && i.naturalWidth > 0))))"
         "</script>")


def _run(user_data_dir, *argv):
    cmd = [CHROMIUM, "--headless", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
           f"--user-data-dir={user_data_dir}", *argv]
    if os.geteuid() == 0:
        cmd.insert(1, "--no-sandbox")          # chromium refuses to run as root with its sandbox
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout


class _Page(html.parser.HTMLParser):
    """The headings (h1, h2, h3) and <body>'s data-images of a dumped DOM."""

    def __init__(self):
        super().__init__()
        self.headings, self.images, self._in = [], None, None

    def handle_starttag(self, tag, attrs):
        if tag == "body" and dict(attrs).get("data-images") is not None:
            self.images = json.loads(dict(attrs)["data-images"])
        if tag in ("h1", "h2", "h3"):
            self._in = tag
            self.headings.append((tag, ""))

    def handle_endtag(self, tag):
        if tag == self._in:
            self._in = None

    def handle_data(self, data):
        if self._in:
            tag, text = self.headings[-1]
            self.headings[-1] = (tag, text + data)


def load(page, work):
    """Open `page` (an HTML file) in chromium: (headings [(tag, text)], images [loaded?]); the
    images list is None when the load event never ran."""
    work = pathlib.Path(work)
    work.mkdir(parents=True, exist_ok=True)
    probe = work / f"probe_{pathlib.Path(page).name}"
    probe.write_text(pathlib.Path(page).read_text().replace("</body>", PROBE + "</body>"))
    parsed = _Page()
    parsed.feed(_run(work / "profile", "--dump-dom", probe.resolve().as_uri()))
    return parsed.headings, parsed.images


def screenshot(page, png, work, width=1000, height=1300):
    """A PNG of the top `height` pixels of `page` as chromium renders it at `width`."""
    _run(pathlib.Path(work) / "profile", f"--window-size={width},{height}",
         f"--screenshot={pathlib.Path(png).resolve()}", pathlib.Path(page).resolve().as_uri())
    return pathlib.Path(png)


def section(page, heading, out):
    """A page of `page`'s head and only its <h2>`heading`</h2> section (up to the next h2), to
    look at one section by itself."""
    text = pathlib.Path(page).read_text()
    start = text.index(f"<h2>{heading}</h2>")
    end = text.find("<h2>", start + 1)
    end = text.index("</body>") if end < 0 else end
    head = text[:text.index("<body>") + len("<body>")]
    pathlib.Path(out).write_text(head + text[start:end] + "</body></html>\n")
    return pathlib.Path(out)


def png_size(path):
    """(width, height) from a PNG's IHDR chunk; raises if the file is no PNG."""
    data = pathlib.Path(path).read_bytes()[:24]
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR", path
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


if __name__ == "__main__":
    import argparse
    import tempfile
    cli = argparse.ArgumentParser(description="screenshots of report pages")
    cli.add_argument("out")
    cli.add_argument("pages", nargs="+")
    cli.add_argument("--section", help="only this h2 section of each page")
    cli.add_argument("--height", type=int, default=1300)
    args = cli.parse_args()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as work:
        for page in args.pages:
            name = pathlib.Path(page).stem
            if args.section:
                name = f"{args.section.lower()}_{name}"
                page = section(page, args.section, pathlib.Path(work) / f"{name}.html")
            png = screenshot(page, out / f"report_{name}.png", work, height=args.height)
            from PIL import Image                 # matplotlib's dependency: a 256-colour PNG
            Image.open(png).convert("RGB").quantize(256).save(png, optimize=True)
            print(png)
