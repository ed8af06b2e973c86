"""The look of the replay report's page: its fonts and its style sheet (no script, nothing
loaded: the page's Content-Security-Policy allows inline style only)."""

from __future__ import annotations

from typing import Final

__all__ = ["CSS", "FONTS"]

FONTS: Final = (
    'system-ui,-apple-system,"Segoe UI",Roboto,"Apple SD Gothic Neo","Malgun Gothic",'
    '"Noto Sans KR","Noto Sans CJK KR","Source Han Sans K","NanumGothic","Nanum Gothic",'
    '"Baekmuk Gulim","UnDotum",sans-serif'
)
"""The page's fonts: each platform's own, then the Korean families of macOS, Windows, Android
and Linux (a Latin font lacks Hangul: a Korean page falls through to the first that has it)."""
CSS: Final = (
    """.lgr{font:14px/1.45 """
    + FONTS
    + """;color:#1d2330;
max-width:1180px;margin:0 auto;padding:12px 20px;box-sizing:border-box;overflow-wrap:anywhere}
.lgr h1{font-size:22px;margin:0}.lgr h2{font-size:17px;margin:24px 0 8px;padding-bottom:4px;
border-bottom:1px solid #dde2ea}.lgr h3{font-size:14px;margin:12px 0 4px}.lgr .meta{color:#5b6577}
.lgr .cards,.lgr .cols{display:flex;flex-wrap:wrap;gap:10px 40px;margin:10px 0}
.lgr .card{border:1px solid #dde2ea;border-radius:6px;padding:6px 14px;margin-right:-30px}
.lgr .card b{display:block;font-size:22px}.lgr td{padding:1px 14px 1px 0;vertical-align:top}
.lgr .bar{display:inline-block;height:10px;border-radius:2px;margin-right:6px}
.lgr .run{border:1px solid #dde2ea;border-left:5px solid #c62828;border-radius:6px;
padding:8px 12px;margin:10px 0}.lgr .live{border-left-color:#1565c0}.lgr .id{font:600 13px
ui-monospace,Menlo,Consolas,monospace}.lgr svg{display:block;width:100%;margin:6px 0}
.lgr ul{margin:2px 0;padding-left:18px}.lgr .key{display:inline-block}
.lgr .sw{display:inline-block;width:11px;height:11px;border-radius:2px;margin:0 4px 0 10px;
vertical-align:-1px}.lgr summary{cursor:pointer;
font-weight:600;margin:12px 0}.lgr a{color:#0b57d0}.lgr code{font:12.5px ui-monospace,Menlo,
Consolas,"D2Coding",monospace;background:#eef1f5;border-radius:3px;padding:0 3px}
.lgr .tag{font:600 12px/1.6 system-ui,sans-serif;border-radius:9px;padding:1px 8px;color:#fff}
.lgr .tag.fine{background:#c62828}.lgr .tag.loop{background:#2e7d32}
.lgr .advice{border:1px solid #dde2ea;border-left:5px solid #2e7d32;border-radius:6px;
padding:8px 12px;margin:12px 0}.lgr .advice.caveat{border-left-color:#f9a825}
.lgr .card.now{border-color:#1d2330}"""
)
