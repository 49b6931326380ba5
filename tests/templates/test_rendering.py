import pytest

from templates.rendering import TemplateError, compile_version, render, required_variables


def _render(subject: str, html: str, context: dict, text: str = ""):
    return render(compile_version(hash((subject, html, text)), subject, html, text), context)


def test_merge_values_are_escaped_in_html_but_not_in_text():
    email = _render("Hi {{ name }}", "<p>{{ name }}</p>", {"name": "<script>x</script>"},
                    text="Hi {{ name }}")
    assert "&lt;script&gt;" in email.html and "<script>" not in email.html
    assert email.text == "Hi <script>x</script>"


def test_css_is_inlined_and_text_part_is_derived_from_html():
    email = _render("s", "<style>p{color:red}</style><p>Hello <b>Ada</b></p>", {})
    assert 'style="color: red' in email.html
    assert "<style>" not in email.html
    assert email.text == "Hello Ada"


def test_subject_cannot_inject_headers():
    email = _render("Hi {{ name }}", "<p>x</p>", {"name": "Ada\r\nBcc: victim@example.com"})
    assert "\r" not in email.subject and "\n" not in email.subject
    assert email.subject == "Hi Ada Bcc: victim@example.com"


def test_missing_variable_fails_instead_of_rendering_blank():
    with pytest.raises(TemplateError, match="code"):
        _render("Code {{ code }}", "<p>x</p>", {})


def test_sandbox_blocks_attribute_escapes():
    with pytest.raises(TemplateError):
        _render("x", "{{ ''.__class__.__mro__[1].__subclasses__() }}", {})


def test_required_variables_are_found_and_syntax_errors_name_the_line():
    assert required_variables(subject="{{ a }}", html_body="{% for x in items %}{{ x }}{% endfor %}") == [
        "a", "items"]
    with pytest.raises(TemplateError, match="line 2"):
        required_variables(subject="ok", html_body="<p>\n{% if %}</p>")
