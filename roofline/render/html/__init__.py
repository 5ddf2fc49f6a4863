"""Self-contained HTML reports: one page per answer of analyze, explain, whatif, predict
and validate, built from the answer's JSON document with Bokeh (scripts inlined)."""

from roofline.render.html.report import html_report, read_document, write_html_report

__all__ = ["html_report", "read_document", "write_html_report"]
