"""What the page's Vega-Lite charts draw, for :mod:`bench.browser`: a canvas is not in the
page's DOM, so its pixels are read here (ink, colours, a digest) and the mouse is pointed at
a colour or wheeled to zoom; and the colour scheme the browser asks the page for.
"""

from __future__ import annotations

from typing import Any

from bench.browser_timing import wait


def plots(d: Any) -> int:
    """Charts on the page (Vega-Lite, each on a canvas)."""
    from selenium.webdriver.common.by import By

    return len(d.find_elements(By.CSS_SELECTOR, '[data-testid="stVegaLiteChart"]'))


_FIND_COLOR = """
const [r, g, b] = arguments[0];
const all = Array.from(document.querySelectorAll('[data-testid="stVegaLiteChart"] canvas'));
for (const c of all.slice(arguments[1]).slice(0, 1)) {
  const px = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  const scale = c.width / c.getBoundingClientRect().width;
  // the middle of the widest horizontal run of the colour, from the bottom up (the legend, on
  // top, has a small swatch of every colour too; a bar's edge may be a pixel wide)
  let best = null;
  for (let y = c.height - 1; y >= 0; y--) {
    let run = 0;
    for (let x = 0; x <= c.width; x++) {
      const i = 4 * (y * c.width + x);
      if (x < c.width && Math.abs(px[i] - r) + Math.abs(px[i + 1] - g) + Math.abs(px[i + 2] - b) < 6) {
        run++;
      } else if (run) {
        if (!best || run > best[0]) best = [run, x - run / 2, y];
        run = 0;
      }
    }
  }
  if (best) {
    return [best[1] / scale, best[2] / scale, c.getBoundingClientRect().width,
            c.getBoundingClientRect().height, all.indexOf(c)];
  }
}
return null;
"""


def hover_color(d: Any, rgb: tuple[int, int, int], nth: int = -1) -> str:
    """Point the mouse at the widest mark of colour ``rgb`` on the ``nth`` Vega-Lite canvas
    (the middle of its widest run of pixels); the tooltip's text then."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    found = d.execute_script(_FIND_COLOR, list(rgb), nth)
    if not found:
        raise AssertionError(f"no pixel of colour {rgb} on canvas {nth}")
    x, y, w, h, nth = found
    canvas = d.find_elements(By.CSS_SELECTOR, '[data-testid="stVegaLiteChart"] canvas')[int(nth)]
    ActionChains(d).move_to_element_with_offset(canvas, int(x - w / 2), int(y - h / 2)).perform()
    tip = wait(d, lambda d: d.find_elements(By.CSS_SELECTOR, "#vg-tooltip-element.visible"), "a tooltip")
    return str(tip[0].get_attribute("textContent"))


def canvas_hash(d: Any, nth: int = -1) -> int:
    """A digest of what the ``nth`` Vega-Lite canvas shows (to see that it was redrawn)."""
    return int(
        d.execute_script(
            """
const all = document.querySelectorAll('[data-testid="stVegaLiteChart"] canvas');
const c = Array.from(all).slice(arguments[0])[0];
const px = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
let h = 0;
for (let i = 0; i < px.length; i += 7) h = (h * 31 + px[i]) | 0;
return h;""",
            nth,
        )
    )


def zoom_canvas(d: Any, clicks: int, nth: int = -1) -> None:
    """Ctrl + mouse wheel over the middle of the ``nth`` Vega-Lite canvas, like a person
    zooming in (``clicks`` > 0) or out."""
    from selenium.webdriver.common.action_chains import ActionChains, ScrollOrigin
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    canvas = d.find_elements(By.CSS_SELECTOR, '[data-testid="stVegaLiteChart"] canvas')[nth]
    chain = ActionChains(d).move_to_element(canvas).key_down(Keys.CONTROL)
    for _ in range(abs(clicks)):
        chain.scroll_from_origin(ScrollOrigin.from_element(canvas), 0, -120 if clicks > 0 else 120)
    chain.key_up(Keys.CONTROL).perform()


def canvas_ink(d: Any) -> list[int]:
    """Pixels not of the background on each Vega-Lite chart's canvas: what a canvas draws
    is not in the page's DOM, so this is how a test sees that marks were drawn."""
    return [
        int(n)
        for n in d.execute_script(
            """
return Array.from(document.querySelectorAll('[data-testid="stVegaLiteChart"] canvas')).map(c => {
  const px = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  let n = 0;
  for (let i = 0; i < px.length; i += 4) if (px[i + 3] > 0 && px[i] + px[i + 1] + px[i + 2] < 720) n++;
  return n;
});"""
        )
    ]


def color_scheme(d: Any, scheme: str) -> None:
    """Make the browser prefer a ``"dark"`` or ``"light"`` theme, as a person's system
    setting does (the page follows it at once, without a script run)."""
    feature = {"name": "prefers-color-scheme", "value": scheme}
    d.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": [feature]})


def colour_pixels(d: Any, colours: list[str], nth: int = -1) -> list[int]:
    """Pixels of each of ``colours`` (``#RRGGBB``) on the ``nth`` Vega-Lite canvas (a
    channel sum within 6 of it, nearly opaque): what a canvas draws in which colour."""
    rgb = [[int(c[k : k + 2], 16) for k in (1, 3, 5)] for c in colours]
    return [
        int(n)
        for n in d.execute_script(
            """
const all = document.querySelectorAll('[data-testid="stVegaLiteChart"] canvas');
const c = Array.from(all).slice(arguments[1])[0];
const px = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
const out = arguments[0].map(() => 0);
for (let i = 0; i < px.length; i += 4) {
  if (px[i + 3] < 200) continue;
  arguments[0].forEach(([r, g, b], k) => {
    if (Math.abs(px[i] - r) + Math.abs(px[i + 1] - g) + Math.abs(px[i + 2] - b) < 6) out[k]++;
  });
}
return out;""",
            rgb,
            nth,
        )
    ]
