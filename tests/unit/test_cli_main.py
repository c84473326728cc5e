"""The entry point's argument clean-up."""

from kbus.cli.main import _fix_dashes


def test_cli_accepts_typographic_dashes_from_blog_posts():
    assert _fix_dashes(["--topic", "t", "\u2013from-beginning", "\u2014topic", "-", "x"]) == [
        "--topic",
        "t",
        "--from-beginning",
        "--topic",
        "-",
        "x",
    ]
