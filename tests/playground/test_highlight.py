"""Structured output views: highlighted JSON and the XML view, escaped."""

from __future__ import annotations

import html
import re

from playground.highlight import json_html, json_text, xml_html, xml_text


def _text(markup: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", markup))


def test_json_html_marks_tokens_and_keeps_the_text():
    value = {"result": True, "comment": 'Art. 6 "<b>" & co', "score": -1.5e3, "none": None, "list": [1, "x"]}
    markup = str(json_html(value))
    assert _text(markup) == json_text(value)
    assert '<span class="tok-key">&quot;result&quot;</span>' in markup
    assert '<span class="tok-literal">true</span>' in markup
    assert '<span class="tok-number">-1500.0</span>' in markup
    assert "<b>" not in markup  # the model's text is escaped


def test_xml_view():
    value = {"result": False, "comment": "a < b & c", "items": [1, {"k": None}], "2bad": "x"}
    assert xml_text(value, "validation") == "\n".join(
        [
            "<validation>",
            "  <result>false</result>",
            "  <comment>a &lt; b &amp; c</comment>",
            "  <items>",
            "    <item>1</item>",
            "    <item>",
            '      <k nil="true"/>',
            "    </item>",
            "  </items>",
            '  <item key="2bad">x</item>',
            "</validation>",
        ]
    )
    markup = str(xml_html(value, "validation"))
    assert _text(markup) == xml_text(value, "validation")
    assert '<span class="tok-tag">&lt;validation</span>' in markup
