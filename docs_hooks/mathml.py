"""MkDocs hook: the site's equations rendered to MathML when the site is built.

``pymdownx.arithmatex`` (generic mode) wraps each ``$$ … $$`` block in
``<div class="arithmatex">\\[ … \\]</div>`` and each inline ``\\( … \\)`` in a span; this hook
replaces the TeX inside with MathML (``latex2mathml``), which browsers render natively: no
JavaScript, no CDN, equations that show with the network off.
"""

from __future__ import annotations

import html
import re

from latex2mathml.converter import convert

_MATH = re.compile(
    r'<(?P<tag>div|span) class="arithmatex">\\(?P<open>[\[(])(?P<tex>.*?)\\[\])]</(?P=tag)>',
    re.DOTALL,
)


def _render(match: re.Match) -> str:
    tex = html.unescape(match["tex"]).strip()
    display = "block" if match["open"] == "[" else "inline"
    return f'<{match["tag"]} class="arithmatex">{convert(tex, display=display)}</{match["tag"]}>'


def on_page_content(content: str, **kwargs) -> str:
    return _MATH.sub(_render, content)
